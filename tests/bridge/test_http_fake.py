"""LIFE/TOOL/HTTP behaviours over HTTP against the real fake (``palace-conformance fake http``).

Two fake processes per test worker (stateless, and ``--sessions``), each on an ephemeral port with
its own HOME and journal, made fresh for every test through the control API (reset, token,
faults armed) and read from a journal mark on. A stdio shim is also put on PATH, journaling to
its own file, to prove no local child is ever spawned.
"""

from __future__ import annotations

import asyncio
import io
import socket
import time

import pytest

from palace_bridge.client import create_client
from palace_bridge.errors import (
    PalaceAuthError,
    PalaceConnectionClosed,
    PalaceHTTPError,
    PalaceProtocolError,
    PalaceSessionLost,
    PalaceTimeout,
    PalaceToolError,
    PalaceUnavailable,
)
from palace_conformance.resources import tool_catalogue

from .support import SLACK_S, HttpFake, Scenario, eventually, remote_env, run

TOKEN = "fake-token-Zq81"
LINE = "mempalace-mcp unavailable after retries; continuing without palace tools"


class Remote:
    """An HTTP fake made fresh, a stdio trap on PATH, and a client factory."""

    def __init__(self, root, fake: HttpFake, *, token: str | None = None,
                 faults: list[str] | None = None, plan=None) -> None:
        self.trap = Scenario(root / "trap")  # a local mempalace-mcp that must never start
        self.fake = fake
        fake.reset(token=token, faults=faults, plan=plan)
        self.stderr = io.StringIO()
        self.token = token

    def client(self, **knobs: str):
        env = remote_env(self.fake.url, **knobs)
        trap = self.trap.env
        env["PATH"] = trap["PATH"]
        env["PALACE_FAKE_JOURNAL"] = trap["PALACE_FAKE_JOURNAL"]
        if self.token and "MEMPALACE_REMOTE_TOKEN" not in knobs:
            env["MEMPALACE_REMOTE_TOKEN"] = self.token
        return create_client(env, stderr=self.stderr)

    def calls(self, tool: str = "mempalace_status"):
        return [r for r in self.fake.received("tools/call") if r.get("tool") == tool]

    def sessions_opened(self):
        return [r["session"] for r in self.fake.records("session") if r["event"] == "opened"]

    def check_no_local_child(self):
        assert self.trap.pids() == [], "fail-closed: never a local child in remote mode"


@pytest.fixture(scope="session")
def fake_pool(tmp_path_factory):
    pool: dict[bool, HttpFake] = {}

    def get(sessions: bool) -> HttpFake:
        if sessions not in pool:
            root = tmp_path_factory.mktemp("stateful" if sessions else "stateless")
            pool[sessions] = HttpFake(root, sessions=sessions)
        return pool[sessions]

    yield get
    for fake in pool.values():
        fake.close()


@pytest.fixture
def make_remote(tmp_path, fake_pool):
    made: list[Remote] = []

    def make(*, sessions: bool = False, **options) -> Remote:
        remote = Remote(tmp_path / f"r{len(made)}", fake_pool(sessions), **options)
        made.append(remote)
        return remote

    yield make
    for remote in made:
        remote.check_no_local_child()


async def status(client, **kwargs):
    return await client.call_tool("mempalace_status", {}, **kwargs)


# -- LIFE ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("sessions", [False, True])
def test_life02_life05_remote_works_stateless_and_stateful_without_a_local_child(make_remote,
                                                                                 sessions):
    remote = make_remote(sessions=sessions)

    async def main():
        client = remote.client()
        assert client.remote
        assert await client.start()
        result = await status(client)
        pids = client.child_pids
        await client.stop()
        return result, pids

    result, pids = run(main())
    assert '"total_drawers"' in result.text and pids == []
    methods = [r.get("method") for r in remote.fake.received()]
    assert methods == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
    assert len(remote.sessions_opened()) == (1 if sessions else 0)
    remote.check_no_local_child()

#: a request timeout for tests whose fault answers at once: a loaded CI machine must never turn
#: the fault into a timeout (the fast 300 ms of FAST is for tests about timeouts)
SLOW_OK = "10000"


def test_life02_unreachable_remote_never_falls_back_to_a_local_child(tmp_path):
    trap = Scenario(tmp_path)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens here
    stderr = io.StringIO()

    async def main():
        env = remote_env(f"http://127.0.0.1:{port}/mcp")
        env["PATH"] = trap.env["PATH"]
        env["PALACE_FAKE_JOURNAL"] = trap.env["PALACE_FAKE_JOURNAL"]
        client = create_client(env, stderr=stderr)
        started = await client.start()
        outcomes = []
        for _ in range(3):
            try:
                await status(client)
            except PalaceUnavailable as exc:
                outcomes.append(exc)
        await client.stop()
        return started, outcomes, client.child_pids

    started, outcomes, pids = run(main())
    assert started is False and len(outcomes) == 3 and pids == []
    assert trap.pids() == []
    assert stderr.getvalue() == LINE + "\n"


def test_life06_stop_deletes_a_held_session(make_remote):
    remote = make_remote(sessions=True)

    async def main():
        client = remote.client()
        await client.start()
        await client.stop()

    run(main())
    deletes = [r for r in remote.fake.requests() if r["method"] == "DELETE"]
    opened = remote.sessions_opened()
    assert len(deletes) == 1 and deletes[0]["headers"]["mcp-session-id"] == opened[0]
    assert [r["event"] for r in remote.fake.records("session")] == ["opened", "deleted"]


def test_life06_stateless_server_gets_no_delete(make_remote):
    remote = make_remote()

    async def main():
        client = remote.client()
        await client.start()
        await client.stop()

    run(main())
    assert [r["method"] for r in remote.fake.requests()] == ["POST"] * 3


# -- TOOL over HTTP ------------------------------------------------------------------------------

def test_tool01_to_04_over_http(make_remote):
    remote = make_remote(faults=["lock_held@mempalace_add_drawer,pid=77"])
    arguments = {"wing": "w", "room": "r", "content": "ünïcode\nline", "added_by": "x"}

    async def main():
        client = remote.client()
        tools = await client.tools()
        with pytest.raises(PalaceToolError) as unknown:
            await client.call_tool("mempalace_diary_read", {"agent": "pi"})
        with pytest.raises(PalaceToolError) as lock:
            await client.call_tool("mempalace_add_drawer", arguments)
        await client.stop()
        return tools, unknown.value, lock.value

    tools, unknown, lock = run(main())
    catalogue = tool_catalogue()["tools"]
    assert [(t.name, t.input_schema) for t in tools] == [(t["name"], t["inputSchema"])
                                                         for t in catalogue]
    assert unknown.code == -32602 and "Unknown parameter 'agent'" in unknown.message
    assert lock.code == -32001 and lock.data["failure_kind"] == "peer_contention"
    sent = remote.calls("mempalace_add_drawer")[0]["message"]["params"]["arguments"]
    assert sent == arguments


# -- HTTP-01 / 02 / 03 ---------------------------------------------------------------------------

def test_http01_bearer_token_on_every_request_and_nowhere_else(make_remote):
    remote = make_remote(sessions=True, token=TOKEN)

    async def main():
        client = remote.client(MEMPALACE_EXT_DEBUG="1", MEMPALACE_MCP_KEEPALIVE_MS="100")
        await client.start()
        await asyncio.sleep(0.25)
        with pytest.raises(PalaceToolError) as caught:
            await client.call_tool("mempalace_diary_read", {"agent": TOKEN})
        await status(client)
        await client.stop()
        return str(caught.value)

    error_text = run(main())
    requests = remote.fake.requests()
    assert {r["method"] for r in requests} == {"POST", "DELETE"}
    assert "ping" in [r.get("method") for r in remote.fake.received()]
    for request in requests:
        assert request["headers"]["authorization"] == "Bearer <redacted>", request
        assert TOKEN not in request["path"]
    assert [r for r in remote.fake.records("http_response") if r["status"] == 401] == []
    assert TOKEN not in remote.stderr.getvalue()
    assert "<redacted>" in error_text or TOKEN not in error_text


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_http02_401_at_connect_retries_then_prints_the_line(make_remote, token):
    remote = make_remote(token=TOKEN)

    async def main():
        knobs = {"MEMPALACE_REMOTE_TOKEN": token} if token else {"MEMPALACE_REMOTE_TOKEN": ""}
        client = remote.client(**knobs)
        started = await client.start()
        tools = await client.tools()
        await client.stop()
        return started, tools

    started, tools = run(main())
    assert (started, tools) == (False, [])
    statuses = [r["status"] for r in remote.fake.records("http_response")]
    assert statuses == [401, 401, 401], "one try and two retries (connect_retries=2)"
    assert remote.stderr.getvalue() == LINE + "\n"


def test_http02_dns_failure_is_unreachable(tmp_path):
    stderr = io.StringIO()

    async def main():
        client = create_client(remote_env("http://palace.invalid/mcp",
                                          MEMPALACE_REMOTE_CONNECT_RETRIES="1"), stderr=stderr)
        return await client.start()

    assert run(main()) is False
    assert stderr.getvalue() == LINE + "\n"


def test_http03_session_id_and_version_on_every_later_request(make_remote):
    remote = make_remote(sessions=True)

    async def main():
        client = remote.client()
        await client.start()
        await status(client)
        await client.stop()

    run(main())
    session = remote.sessions_opened()[0]
    received = remote.fake.received()
    first = received[0]["http"]["headers"]
    assert received[0]["method"] == "initialize"
    assert "mcp-session-id" not in first and "mcp-protocol-version" not in first
    for record in received[1:]:
        headers = record["http"]["headers"]
        assert headers["mcp-session-id"] == session
        assert headers["mcp-protocol-version"] == "2025-11-25"


# -- HTTP-04 / 05 / 06 / 07 ----------------------------------------------------------------------

def test_http04_forgotten_session_gets_one_reinitialize_and_one_retry(make_remote):
    remote = make_remote(sessions=True)

    async def main():
        client = remote.client()
        await client.start()
        remote.fake.control("POST", "sessions/forget")
        result = await status(client)
        await client.stop()
        return result

    result = run(main())
    assert not result.is_error
    methods = [r.get("method") for r in remote.fake.received()]
    assert methods == ["initialize", "notifications/initialized", "tools/list",
                       "initialize", "notifications/initialized", "tools/call"]
    statuses = [r["status"] for r in remote.fake.records("http_response")]
    assert statuses.count(404) == 1
    _first, second = remote.sessions_opened()
    second_init = remote.fake.received("initialize")[1]["http"]["headers"]
    assert "mcp-session-id" not in second_init, "the fresh initialize carries no old id"
    assert remote.fake.received("tools/call")[0]["http"]["headers"]["mcp-session-id"] == second


def test_http04_second_404_fails_the_call_without_a_loop(make_remote):
    remote = make_remote(sessions=True)

    async def main():
        client = remote.client()
        await client.start()
        remote.fake.control("POST", "faults", {"id": "forget-twice", "action": "forget_session",
                                               "on": {"method": "tools/call"}, "times": 2})
        with pytest.raises(PalaceSessionLost):
            await status(client)
        after = await status(client)  # a new call gets a new session and works
        await client.stop()
        return after

    after = run(main())
    assert not after.is_error
    assert len(remote.fake.received("initialize")) == 3
    assert [r["status"] for r in remote.fake.records("http_response")].count(404) == 2


def test_http05_preamble_is_the_first_call_on_every_session(make_remote):
    remote = make_remote(sessions=True)
    preamble = '{"tool": "mempalace_list_wings", "arguments": {}}'

    async def main():
        client = remote.client(MEMPALACE_SESSION_PREAMBLE=preamble)
        await client.start()
        remote.fake.control("POST", "sessions/forget")
        await status(client)
        await client.stop()

    run(main())
    wire = [r.get("tool") or r.get("method") for r in remote.fake.received()]
    assert wire == ["initialize", "notifications/initialized", "tools/list",
                    "mempalace_list_wings",
                    "initialize", "notifications/initialized", "mempalace_list_wings",
                    "mempalace_status"]


def test_http06_keepalive_holds_the_session_and_a_404_replaces_it(make_remote):
    remote = make_remote(sessions=True)

    async def main():
        # a request budget far past a loaded machine's answer time: a ping that timed out would
        # send a cancel into the forgotten session and draw a second 404
        client = remote.client(MEMPALACE_MCP_KEEPALIVE_MS="150", MEMPALACE_MCP_TIMEOUT_MS=SLOW_OK)
        await client.start()
        assert await eventually(lambda: remote.fake.received("ping"))  # on the first session
        remote.fake.control("POST", "sessions/forget")
        # the next ping gets the 404, the session is replaced before any call, and the pings
        # go on in the new one
        assert await eventually(lambda: len(remote.sessions_opened()) == 2
                                and len(remote.fake.received("ping")) >= 2)
        result = await status(client)
        await client.stop()
        return result

    assert not run(main()).is_error
    first, second = remote.sessions_opened()
    pings = remote.fake.received("ping")
    assert len(pings) >= 2
    assert pings[0]["http"]["headers"]["mcp-session-id"] == first
    call = remote.fake.received("tools/call")[0]
    assert call["http"]["headers"]["mcp-session-id"] == second
    assert [r["status"] for r in remote.fake.records("http_response")].count(404) == 1, \
        "the session was replaced by the ping's 404, before the call"


def test_http07_no_get_stream_is_ever_opened(make_remote):
    remote = make_remote(sessions=True, faults=["sse@mempalace_status,keepalives=2"])

    async def main():
        client = remote.client(MEMPALACE_MCP_KEEPALIVE_MS="100")
        await client.start()
        await status(client)
        await asyncio.sleep(0.3)
        await client.stop()

    run(main())
    assert "GET" not in {r["method"] for r in remote.fake.requests()}


# -- HTTP-08 / 09 / 10 / 11 ----------------------------------------------------------------------

def test_http08_401_mid_session_is_an_auth_error_with_no_reinitialize(make_remote):
    remote = make_remote(sessions=True, token=TOKEN,
                         faults=["rotate_token@mempalace_status,token=rotated"])

    async def main():
        client = remote.client(MEMPALACE_MCP_TIMEOUT_MS=SLOW_OK)  # the 401, never a timeout
        await client.start()
        with pytest.raises(PalaceAuthError) as caught:
            await status(client)
        with pytest.raises(PalaceAuthError):
            await client.call_tool("mempalace_list_wings", {})
        await client.stop()
        return caught.value

    error = run(main())
    assert error.status == 401
    assert len(remote.fake.received("initialize")) == 1


@pytest.mark.parametrize("fault", [
    "http_status@mempalace_status,status=500",
    'http_status@mempalace_status,status=503,body={"jsonrpc":"2.0","id":null,'
    '"error":{"code":-32603,"message":"Internal error"}}',
    "reset@mempalace_status,after_bytes=0",
    "reset@mempalace_status,after_bytes=40",
])
def test_http09_5xx_or_reset_fails_that_call_keeps_the_session_and_never_replays(make_remote,
                                                                                 fault):
    remote = make_remote(sessions=True, faults=[fault])

    async def main():
        client = remote.client(MEMPALACE_MCP_TIMEOUT_MS=SLOW_OK)  # the fault, never a timeout
        await client.start()
        with pytest.raises((PalaceHTTPError, PalaceConnectionClosed)) as caught:
            await status(client)
        after = await status(client)
        await client.stop()
        return caught.value, after

    error, after = run(main())
    if "http_status" in fault:
        assert isinstance(error, PalaceHTTPError)
        assert error.status == (500 if "500" in fault else 503)
        if "-32603" in fault:
            assert error.code == -32603
    else:
        assert isinstance(error, PalaceConnectionClosed)
    assert not after.is_error
    assert len(remote.calls()) == 2, "the failed call was not replayed"
    assert len(remote.sessions_opened()) == 1, "the session survived"


@pytest.mark.parametrize("sse", ["keepalives=3,event_delay_ms=80", "keepalives=0"])
def test_http10_sse_answers_with_comments_and_slow_events_are_accepted(make_remote, sse):
    remote = make_remote(faults=[f"sse@mempalace_status,{sse}",
                                 "server_request@mempalace_list_wings,method=ping"])

    async def main():
        client = remote.client(MEMPALACE_MCP_TIMEOUT_MS="5000")
        await client.start()
        result = await status(client)
        wings = await client.call_tool("mempalace_list_wings", {})
        await asyncio.sleep(0.1)
        await client.stop()
        return result, wings

    result, wings = run(main())
    assert '"total_drawers"' in result.text and "wings" in wings.text
    responses = remote.fake.records("http_response")
    assert any(r["headers"].get("content-type", "").startswith("text/event-stream")
               for r in responses)
    answered = [r["message"] for r in remote.fake.records("recv") if r.get("response")]
    assert answered and answered[0]["result"] == {}, "the server's ping was answered"


@pytest.mark.parametrize(("fault", "needle"), [
    ("accept_202@mempalace_status", "HTTP 202"),
    ("content_type@mempalace_status,value=text/html", "unexpected content type"),
    ("sse@mempalace_status,close_without_response=true", "SSE stream ended"),
    ("garbage@mempalace_status", "not valid JSON-RPC"),
])
def test_http_protocol_breakage_fails_fast(make_remote, fault, needle):
    remote = make_remote(faults=[fault])

    async def main():
        client = remote.client(MEMPALACE_MCP_TIMEOUT_MS="10000")
        await client.start()
        began = time.monotonic()
        with pytest.raises(PalaceProtocolError) as caught:
            await status(client)
        elapsed = time.monotonic() - began
        after = await status(client)
        await client.stop()
        return caught.value, elapsed, after

    error, elapsed, after = run(main())
    assert needle in str(error) and elapsed < 2.0 and not after.is_error


def test_http12_a_stream_closed_early_is_resumed_from_its_last_event_id(make_remote):
    remote = make_remote(faults=[
        "sse@mempalace_status,close_without_response=true,priming_id=p-1,retry_ms=100"])

    async def main():
        client = remote.client(MEMPALACE_MCP_TIMEOUT_MS="10000")
        await client.start()
        result = await status(client)
        await client.stop()
        return result

    result = run(main())
    assert not result.is_error and '"total_drawers"' in result.text
    gets = [r for r in remote.fake.records("http_request") if r["method"] == "GET"]
    assert [g["headers"].get("last-event-id") for g in gets] == ["p-1"]
    assert "content-type" not in gets[0]["headers"]  # no body, no Content-Type
    assert [r["last_event_id"] for r in remote.fake.records("http_resumed")] == ["p-1"]


def test_http12_a_retry_past_the_deadline_fails_the_call_at_once(make_remote):
    remote = make_remote(faults=[
        "sse@mempalace_status,close_without_response=true,priming_id=p-1,retry_ms=60000"])

    async def main():
        client = remote.client(MEMPALACE_MCP_TIMEOUT_MS="3000")
        await client.start()
        began = time.monotonic()
        with pytest.raises(PalaceProtocolError) as caught:
            await status(client)
        elapsed = time.monotonic() - began
        await client.stop()
        return caught.value, elapsed

    error, elapsed = run(main())
    assert "deadline" in str(error) and elapsed < 2.0
    assert not [r for r in remote.fake.records("http_request") if r["method"] == "GET"]


def test_http11_timeout_sends_cancelled_and_the_session_stays_usable(make_remote):
    remote = make_remote(sessions=True, faults=["stall@mempalace_status"])

    async def main():
        client = remote.client(MEMPALACE_MCP_TIMEOUT_MS="300")
        await client.start()
        began = time.monotonic()
        with pytest.raises(PalaceTimeout):
            await status(client)
        elapsed = time.monotonic() - began
        after = await client.call_tool("mempalace_list_wings", {})
        await asyncio.sleep(0.1)
        await client.stop()
        return elapsed, after

    elapsed, after = run(main())
    assert 0.3 <= elapsed < 0.3 + SLACK_S
    assert not after.is_error
    call_id = remote.calls()[0]["id"]
    cancels = remote.fake.received("notifications/cancelled")
    assert [c["message"]["params"]["requestId"] for c in cancels] == [call_id]
    assert cancels[0]["http"]["headers"]["mcp-session-id"] == remote.sessions_opened()[0]
    assert len(remote.sessions_opened()) == 1


def test_http11_initialize_timeout_is_never_cancelled(make_remote):
    remote = make_remote(faults=["stall@initializex*"])

    async def main():
        client = remote.client(MEMPALACE_MCP_INIT_TIMEOUT_MS="200",
                               MEMPALACE_REMOTE_CONNECT_RETRIES="1")
        return await client.start()

    assert run(main()) is False
    assert len(remote.fake.received("initialize")) == 2
    assert remote.fake.received("notifications/cancelled") == []
    assert remote.stderr.getvalue() == LINE + "\n"
