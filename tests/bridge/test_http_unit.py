"""HTTP edge cases with respx (no sockets): wire shapes the real fake cannot easily produce, and
fast checks of the session rules through the real engine. Behaviour-level proof against a real
server is in ``test_http_fake.py``.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx

from palace_bridge.client import create_client
from palace_bridge.errors import (
    PalaceAuthError,
    PalaceConnectionClosed,
    PalaceHTTPError,
    PalaceProtocolError,
    PalaceSessionLost,
    PalaceTimeout,
    PalaceUnavailable,
)

from .support import SLACK_S, remote_env, run

URL = "https://palace.example.test/mcp"
TOKEN = "tok-SECRET-123"
TOOLS = [{"name": "mempalace_status", "description": "d",
          "inputSchema": {"type": "object", "properties": {}}}]


class Server:
    """A scripted MCP server behind respx; ``script[method]`` overrides an answer."""

    def __init__(self, *, session_ids: bool = True) -> None:
        self.requests: list[httpx.Request] = []
        self.session_ids = session_ids
        self.sessions = 0
        self.script: dict[str, list[Callable[[dict[str, Any]], Any]]] = {}
        #: answers a GET (a resuming one, HTTP-12); None: 405, as for the idle stream
        self.get: Callable[[httpx.Request], httpx.Response] | None = None

    def on(self, method: str, *answers: Callable[[dict[str, Any]], Any]) -> None:
        self.script.setdefault(method, []).extend(answers)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.method == "POST"]

    @property
    def methods(self) -> list[str]:
        return [b.get("method", "response") for b in self.bodies]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method != "POST":
            return self.get(request) if request.method == "GET" and self.get else (
                httpx.Response(405))
        body = json.loads(request.content)
        method = body.get("method")
        if self.script.get(method):
            answer = self.script[method].pop(0)(body)
            if asyncio.iscoroutine(answer):
                answer = await answer
            if answer is not None:
                return answer
        if "id" not in body:
            return httpx.Response(202)
        headers = {}
        if method == "initialize":
            self.sessions += 1
            if self.session_ids:
                headers["Mcp-Session-Id"] = f"sess-{self.sessions}"
            result: Any = {"protocolVersion": body["params"]["protocolVersion"],
                           "capabilities": {"tools": {}}, "serverInfo": {"name": "x"}}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "ok"}]}
        else:
            result = {}
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result},
                              headers=headers)


def reply(body: dict[str, Any], result: Any = None, **kwargs: Any) -> httpx.Response:
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"],
                                     "result": result if result is not None else {}}, **kwargs)


def status(code: int, **kwargs: Any) -> Callable[[dict[str, Any]], httpx.Response]:
    return lambda body: httpx.Response(code, **kwargs)


def scenario(server: Server, body: Callable[[Any], Any], **knobs: str) -> tuple[Any, str]:
    stderr = io.StringIO()

    async def main():
        with respx.mock(assert_all_called=False) as mock:
            mock.route(url=URL).mock(side_effect=server)
            client = create_client(remote_env(URL, MEMPALACE_REMOTE_TOKEN=TOKEN, **knobs),
                                   stderr=stderr)
            try:
                return await body(client)
            finally:
                await client.stop()

    return run(main()), stderr.getvalue()


async def status_call(client):
    return await client.call_tool("mempalace_status", {})


def test_headers_on_every_request():
    server = Server()

    async def body(client):
        await client.start()
        await status_call(client)

    scenario(server, body)
    posts = [r for r in server.requests if r.method == "POST"]
    assert [json.loads(r.content).get("method") for r in posts] == [
        "initialize", "notifications/initialized", "tools/list", "tools/call"]
    for request in server.requests:
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert TOKEN not in str(request.url)
    for request in posts:
        assert request.headers["accept"] == "application/json, text/event-stream"
        assert request.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in posts[0].headers
    assert "mcp-protocol-version" not in posts[0].headers
    for request in posts[1:]:
        assert request.headers["mcp-session-id"] == "sess-1"
        assert request.headers["mcp-protocol-version"] == "2025-11-25"
    delete = server.requests[-1]
    assert delete.method == "DELETE" and delete.headers["mcp-session-id"] == "sess-1"
    assert "content-type" not in delete.headers  # no body, no Content-Type
    assert [r.method for r in server.requests].count("GET") == 0, "no GET stream (HTTP-07)"


def test_negotiated_older_version_is_the_header_sent():
    server = Server()
    server.on("initialize", lambda b: reply(b, {"protocolVersion": "2025-03-26",
                                                "capabilities": {}, "serverInfo": {}},
                                            headers={"Mcp-Session-Id": "old"}))

    async def body(client):
        await status_call(client)

    scenario(server, body)
    assert server.requests[-2].headers["mcp-protocol-version"] == "2025-03-26"


def test_unsupported_version_is_refused_without_initialized():
    server = Server()
    server.on("initialize", *[lambda b: reply(b, {"protocolVersion": "2024-01-01"})] * 3)

    async def body(client):
        return await client.start()

    started, _stderr = scenario(server, body)
    assert started is False
    assert "notifications/initialized" not in server.methods
    assert server.methods == ["initialize"] * 3


def test_sse_answer_with_comments_server_ping_and_foreign_events():
    server = Server()

    def stream(b):
        call_id = b["id"]
        events = (
            ": keep-alive\n\n"
            "event: other\ndata: {\"ignored\": true}\n\n"
            'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n'
            'data: {"jsonrpc":"2.0","id":"srv-1","method":"ping"}\n\n'
            'data: {"jsonrpc":"2.0","id":999,"result":{}}\n\n'
            f'data: {{"jsonrpc":"2.0","id":{call_id},\n'
            'data: "result":{"content":[{"type":"text","text":"via sse"}]}}\n\n')
        return httpx.Response(200, content=events.encode(),
                              headers={"Content-Type": "text/event-stream"})

    server.on("tools/call", stream)

    async def body(client):
        result = await status_call(client)
        await asyncio.sleep(0.05)  # the ping answer is posted in the background
        return result

    result, _ = scenario(server, body)
    assert result.text == "via sse"
    answers = [b for b in server.bodies if "method" not in b]
    assert answers == [{"jsonrpc": "2.0", "id": "srv-1", "result": {}}]


@pytest.mark.parametrize(("answer", "needle"), [
    (lambda b: httpx.Response(202), "HTTP 202 with no JSON-RPC body"),
    (lambda b: httpx.Response(200, text="<html>hi</html>",
                              headers={"Content-Type": "text/html"}), "unexpected content type"),
    (lambda b: httpx.Response(200, text="{not json",
                              headers={"Content-Type": "application/json"}), "not valid JSON"),
    (lambda b: httpx.Response(200, json={"jsonrpc": "2.0", "id": "x", "result": {}}),
     "carries id 'x'"),
    (lambda b: httpx.Response(200, json={"jsonrpc": "2.0", "id": 99999, "result": {}}),
     "carries id 99999"),  # an id above the request's as well as one of another type
    (lambda b: httpx.Response(200, json={"jsonrpc": "2.0", "id": -1, "result": {}}),
     "carries id -1"),  # and one below it
    (lambda b: httpx.Response(200, text='{"jsonrpc": "2.0", "id": 1, "result": {}}',
                              headers={"Content-Type": "application/javascript"}),
     "unexpected content type"),  # JSON-RPC inside, but not the type MCP names
    (lambda b: httpx.Response(200, content=b": only a comment\n\n",
                              headers={"Content-Type": "text/event-stream"}),
     "SSE stream ended without a response"),
    (lambda b: httpx.Response(200, content=b"data: {broken\n\n",  # dropped, then no answer
                              headers={"Content-Type": "text/event-stream"}),
     "SSE stream ended without a response"),
])
def test_protocol_breakage_fails_fast(answer, needle):
    server = Server()
    server.on("tools/call", answer)

    async def body(client):
        await client.start()
        began = time.monotonic()
        with pytest.raises(PalaceProtocolError) as caught:
            await client.call_tool("mempalace_status", {}, timeout_ms=10000)
        return caught.value, time.monotonic() - began

    (error, elapsed), _ = scenario(server, body)
    assert needle in str(error)
    assert elapsed < 1.0, "never waits for the timeout"


def test_bad_sse_data_is_dropped_and_the_answer_after_it_read():
    """As a malformed stdio line is dropped (STDIO-13), so is an SSE event no parser can read;
    the answer that follows on the same stream is the call's (docs/choices.md)."""
    server = Server()
    answer = b'data: {"jsonrpc": "2.0", "id": ' + b"oops\n\n"

    def reply(body):
        real = json.dumps({"jsonrpc": "2.0", "id": body["id"],
                           "result": {"content": [{"type": "text", "text": "after garbage"}]}})
        return httpx.Response(200, content=answer + b"event: message\ndata: " + real.encode()
                              + b"\n\n", headers={"Content-Type": "text/event-stream"})

    server.on("tools/call", reply)

    async def body(client):
        return await status_call(client)

    result, _ = scenario(server, body)
    assert result.text == "after garbage"


@pytest.mark.parametrize("content_type", ["text/plain", "application/json", None])
def test_a_resuming_get_answered_2xx_without_an_event_stream_fails_the_call(content_type):
    """The GET that resumes a stream (HTTP-12) must answer an event stream (MCP: that or 405);
    the reference refuses any other 2xx at once, even a body shaped like SSE that holds the
    answer. Its own choice (docs/choices.md): the TypeScript SDK reads any 2xx body as the
    stream, so no scenario may pin it."""
    server = Server()
    call_ids: list[Any] = []

    def closed_early(body: dict[str, Any]) -> httpx.Response:
        call_ids.append(body["id"])
        return httpx.Response(200, content=b"id: ev-1\nretry: 10\ndata:\n\n",
                              headers={"Content-Type": "text/event-stream"})

    def resumed(request: httpx.Request) -> httpx.Response:
        answer = json.dumps({"jsonrpc": "2.0", "id": call_ids[-1], "result": {
            "content": [{"type": "text", "text": "replayed"}]}})
        headers = {"Content-Type": content_type} if content_type else {}
        return httpx.Response(200, content=f"event: message\ndata: {answer}\n\n".encode(),
                              headers=headers)

    server.on("tools/call", closed_early)
    server.get = resumed

    async def body(client):
        await client.start()
        with pytest.raises(PalaceProtocolError) as caught:
            await client.call_tool("mempalace_status", {}, timeout_ms=10000)
        return caught.value

    error, _ = scenario(server, body)
    assert "resuming it failed" in str(error)
    gets = [r for r in server.requests if r.method == "GET"]
    assert [g.headers.get("last-event-id") for g in gets] == ["ev-1"]


def test_error_with_null_id_on_a_post_belongs_to_that_post():
    server = Server()
    server.on("tools/call", lambda b: httpx.Response(
        200, json={"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse"}}))

    async def body(client):
        from palace_bridge.errors import PalaceToolError

        with pytest.raises(PalaceToolError) as caught:
            await status_call(client)
        return caught.value.code

    assert scenario(server, body)[0] == -32700


def test_5xx_keeps_status_and_json_rpc_error_and_is_not_replayed():
    server = Server()
    server.on("tools/call", lambda b: httpx.Response(
        503, json={"jsonrpc": "2.0", "id": b["id"],
                   "error": {"code": -32603, "message": "Internal error"}}))

    async def body(client):
        with pytest.raises(PalaceHTTPError) as caught:
            await status_call(client)
        after = await status_call(client)
        return caught.value, after

    (error, after), _ = scenario(server, body)
    assert error.status == 503 and error.code == -32603 and "HTTP 503" in str(error)
    assert server.methods.count("tools/call") == 2, "one failed call + one new call, no replay"
    assert server.methods.count("initialize") == 1, "the session survives"
    calls = [r for r in server.requests if r.method == "POST"
             and json.loads(r.content).get("method") == "tools/call"]
    assert calls[1].headers["mcp-session-id"] == "sess-1"
    assert after.text == "ok"


def test_connection_reset_fails_that_call_only():
    server = Server()

    def reset(b):
        raise httpx.ReadError("Connection reset by peer")

    server.on("tools/call", reset)

    async def body(client):
        with pytest.raises(PalaceConnectionClosed):
            await status_call(client)
        return await status_call(client)

    after, _ = scenario(server, body)
    assert after.text == "ok"
    assert server.methods.count("tools/call") == 2 and server.methods.count("initialize") == 1


def test_404_renews_the_session_and_retries_once():
    server = Server()
    server.on("tools/call", status(404))

    async def body(client):
        return await status_call(client)

    result, _ = scenario(server, body)
    assert result.text == "ok"
    assert server.methods == ["initialize", "notifications/initialized", "tools/list",
                              "tools/call", "initialize", "notifications/initialized",
                              "tools/call"]
    posts = [r for r in server.requests if r.method == "POST"]
    assert "mcp-session-id" not in posts[4].headers, "the new initialize carries no id"
    assert posts[6].headers["mcp-session-id"] == "sess-2"


def test_second_404_fails_with_session_lost_and_no_loop():
    server = Server()
    server.on("tools/call", status(404), status(404))

    async def body(client):
        with pytest.raises(PalaceSessionLost):
            await status_call(client)

    scenario(server, body)
    assert server.methods.count("initialize") == 2 and server.methods.count("tools/call") == 2


def test_404_without_a_session_id_is_a_plain_http_error():
    server = Server(session_ids=False)
    server.on("tools/call", status(404))

    async def body(client):
        with pytest.raises(PalaceHTTPError) as caught:
            await status_call(client)
        return caught.value.status

    assert scenario(server, body)[0] == 404
    assert server.methods.count("initialize") == 1


def test_401_mid_session_is_an_auth_error_without_reinitialize():
    server = Server()
    server.on("tools/call", status(401, text="<p>Error code: 401</p>",
                                      headers={"Content-Type": "text/html"}))

    async def body(client):
        with pytest.raises(PalaceAuthError) as caught:
            await status_call(client)
        return caught.value

    error, stderr = scenario(server, body)
    assert error.status == 401 and "MEMPALACE_REMOTE_TOKEN" in str(error)
    assert TOKEN not in str(error) and TOKEN not in stderr
    assert server.methods.count("initialize") == 1


@pytest.mark.parametrize("failure", [
    lambda b: httpx.Response(401),
    lambda b: (_ for _ in ()).throw(httpx.ConnectError("[Errno -2] Name or service not known")),
    lambda b: (_ for _ in ()).throw(httpx.ConnectError("[Errno 111] Connection refused")),
])
def test_connect_failures_retry_then_print_the_line(failure):
    server = Server()
    server.on("initialize", *[failure] * 10)

    async def body(client):
        started = await client.start()
        with pytest.raises(PalaceUnavailable):
            await status_call(client)
        return started, client.available, client.child_pids

    (started, available, pids), stderr = scenario(server, body,
                                                  MEMPALACE_REMOTE_CONNECT_RETRIES="2")
    assert (started, available, pids) == (False, False, [])
    assert server.methods.count("initialize") == 3, "one try + two retries"
    assert stderr == ("mempalace-mcp unavailable after retries; "
                      "continuing without palace tools\n")
    assert TOKEN not in stderr


def test_connect_recovers_within_the_retries():
    server = Server()
    server.on("initialize", status(503))

    async def body(client):
        return await client.start()

    started, stderr = scenario(server, body)
    assert started and stderr == ""


def test_timeout_sends_cancelled_but_never_for_initialize():
    server = Server()

    async def slow(b):
        await asyncio.sleep(2)

    server.on("tools/call", slow)

    async def body(client):
        await client.start()
        began = time.monotonic()
        with pytest.raises(PalaceTimeout):
            await client.call_tool("mempalace_status", {}, timeout_ms=300)
        elapsed = time.monotonic() - began
        await asyncio.sleep(0.1)
        return elapsed

    elapsed, _ = scenario(server, body)
    assert 0.3 <= elapsed < 0.3 + SLACK_S
    call = next(b for b in server.bodies if b.get("method") == "tools/call")
    cancels = [b for b in server.bodies if b.get("method") == "notifications/cancelled"]
    assert cancels == [{"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": call["id"], "reason": "Request timed out"}}]


def test_initialize_timeout_sends_no_cancel():
    server = Server()

    async def slow(b):
        await asyncio.sleep(2)

    server.on("initialize", *[slow] * 3)

    async def body(client):
        return await client.start()

    started, _ = scenario(server, body, MEMPALACE_MCP_INIT_TIMEOUT_MS="200",
                          MEMPALACE_REMOTE_CONNECT_RETRIES="0")
    assert started is False
    assert "notifications/cancelled" not in server.methods


def test_preamble_runs_first_on_every_session_before_the_retried_call():
    server = Server()
    server.on("tools/call", lambda b: None, lambda b: httpx.Response(404))
    preamble = json.dumps({"tool": "memory_mode", "arguments": {"mode": "work"}})

    async def body(client):
        return await status_call(client)

    scenario(server, body, MEMPALACE_SESSION_PREAMBLE=preamble)
    calls = [(b["method"], b.get("params", {}).get("name")) for b in server.bodies
             if b.get("method") in ("initialize", "tools/call")]
    assert calls == [("initialize", None), ("tools/call", "memory_mode"),
                     ("tools/call", "mempalace_status"),  # 404
                     ("initialize", None), ("tools/call", "memory_mode"),
                     ("tools/call", "mempalace_status")]
    first = next(b for b in server.bodies if b.get("method") == "tools/call")
    assert first["params"]["arguments"] == {"mode": "work"}


def test_keepalive_pings_carry_the_session_and_a_404_replaces_it():
    server = Server()
    server.on("ping", status(404))

    async def body(client):
        await client.start()
        await asyncio.sleep(0.35)
        return await status_call(client)

    result, _ = scenario(server, body, MEMPALACE_MCP_KEEPALIVE_MS="100")
    assert result.text == "ok"
    posts = [r for r in server.requests if r.method == "POST"]
    methods = [json.loads(r.content).get("method") for r in posts]
    first_ping = methods.index("ping")
    assert posts[first_ping].headers["mcp-session-id"] == "sess-1"
    assert methods[first_ping + 1] == "initialize", "replaced right after the 404"
    later_pings = [r for r, m in zip(posts, methods, strict=True) if m == "ping"][1:]
    assert later_pings and all(r.headers["mcp-session-id"] == "sess-2" for r in later_pings)
    call = posts[methods.index("tools/call")]
    assert call.headers["mcp-session-id"] == "sess-2"


def test_no_keepalive_by_default():
    server = Server()

    async def body(client):
        await client.start()
        await asyncio.sleep(0.3)

    scenario(server, body)
    assert "ping" not in server.methods


def test_delete_refused_is_fine_and_stop_is_idempotent():
    server = Server()

    async def body(client):
        await client.start()
        await client.stop()
        await client.stop()

    scenario(server, body)
    assert [r.method for r in server.requests].count("DELETE") == 1


def test_no_delete_without_a_session():
    server = Server(session_ids=False)

    async def body(client):
        await client.start()

    scenario(server, body)
    assert "DELETE" not in [r.method for r in server.requests]


@pytest.mark.parametrize("url", ["palace.example/mcp", "ftp://palace.example/mcp", "http://"])
def test_a_malformed_url_is_named_without_retries(url):
    stderr = io.StringIO()

    async def main():
        client = create_client(remote_env(url), stderr=stderr)
        return await client.start()

    assert run(main()) is False
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("mempalace: MEMPALACE_REMOTE_URL ")
    assert lines[1] == "mempalace-mcp unavailable after retries; continuing without palace tools"


@pytest.mark.parametrize(("url", "bundles_loaded"), [
    ("http://127.0.0.1:1/mcp", 0), ("HTTP://palace.local/mcp", 0),
    ("https://palace.example/mcp", 1)])
def test_a_plain_http_palace_loads_no_ca_bundle(monkeypatch: pytest.MonkeyPatch, url: str,
                                                bundles_loaded: int) -> None:
    """Found by the 50-bridge load test: every client loaded certifi's CA bundle (50-220 ms of
    CPU, blocking the host's event loop), though a plain-http palace never does TLS (redirects
    are not followed); fifty bridges in one host took 9 s to start. An https palace still
    verifies."""
    import ssl

    from palace_bridge.http import HttpTransport
    from palace_bridge.log import Log

    loaded: list[object] = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context",
                        lambda *a, **k: loaded.append(k) or real(*a, **k))
    transport = HttpTransport(url, None, Log(io.StringIO()))
    run(transport.aclose())
    assert len(loaded) == bundles_loaded
