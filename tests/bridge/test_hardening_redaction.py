"""Issue 13, the token in no output: a server that echoes the bearer token in an error body, and a
child whose stderr carries the token cut in two by a read boundary (real loopback sockets and real
processes)."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from palace_bridge.client import create_client
from palace_bridge.errors import PalaceError, PalaceHTTPError, PalaceToolError
from palace_bridge.log import REDACTED, Log, SplitSecretGuard
from palace_conformance.hosts.reference import error_payload

from .hostile_http import Exchange, HostileHttp
from .support import Scenario, bridge_in_process, remote_env, run

TOKEN = "tok-Zq81-echoed-back-by-a-careless-server"
ECHO = f"Authorization: Bearer {TOKEN}"


async def _echo_in_json_rpc_error(message: dict, exchange: Exchange) -> None:
    """200 with a JSON-RPC error: the token in the message and deep in the data."""
    await exchange.json({"jsonrpc": "2.0", "id": message["id"], "error": {
        "code": -32000, "message": f"bad request: {ECHO}",
        "data": {"headers": [ECHO], "seen": {TOKEN: True}}}})


async def _echo_in_http_500_body(message: dict, exchange: Exchange) -> None:
    """500 whose JSON body is a JSON-RPC error echoing the token."""
    body = json.dumps({"jsonrpc": "2.0", "id": message["id"],
                       "error": {"code": -32603, "message": f"crashed on {ECHO}"}}).encode()
    await exchange._head(500, {"Content-Type": "application/json",
                               "Content-Length": str(len(body))})
    exchange.writer.write(body)


async def _echo_in_plain_text_body(message: dict, exchange: Exchange) -> None:
    """502 with a plain-text body (the error's detail is an excerpt of it)."""
    body = f"upstream refused {ECHO}".encode()
    await exchange._head(502, {"Content-Type": "text/plain", "Content-Length": str(len(body))})
    exchange.writer.write(body)


ECHOES = {
    "json-rpc error": (_echo_in_json_rpc_error, PalaceToolError),
    "http 500 json body": (_echo_in_http_500_body, PalaceHTTPError),
    "http 502 text body": (_echo_in_plain_text_body, PalaceHTTPError),
}


@pytest.fixture
def echoing(request):
    answer, _kind = ECHOES[request.param]

    async def handler(message: dict, exchange: Exchange) -> None:
        if message.get("method") == "tools/call":
            await answer(message, exchange)
        else:
            await exchange.accepted()

    server = HostileHttp(handler)
    yield server, request.param
    server.close()


@pytest.mark.parametrize("echoing", sorted(ECHOES), indirect=True)
def test_a_token_echoed_in_an_error_body_reaches_no_error_field(echoing):
    """Medium item: the error a host gets, every field of it and the reference host's error
    object, carry ``<redacted>`` where the server echoed the token."""
    server, case = echoing
    env = remote_env(server.url, MEMPALACE_REMOTE_TOKEN=TOKEN)
    client = create_client(env, stderr=io.StringIO())

    async def main() -> PalaceError:
        assert await client.start()
        try:
            with pytest.raises(PalaceError) as caught:
                await asyncio.wait_for(client.call_tool("mempalace_status", {}), 30)
        finally:
            await client.stop()
        return caught.value

    error = run(main())
    assert isinstance(error, ECHOES[case][1])
    everything = f"{error!s} {error!r} {vars(error)!r} {json.dumps(error_payload(error))}"
    assert TOKEN not in everything
    assert REDACTED in everything


@pytest.mark.parametrize("echoing", ["json-rpc error", "http 502 text body"], indirect=True)
def test_palace_bridge_call_prints_no_echoed_token(echoing, monkeypatch, capsys):
    server, _case = echoing
    env = remote_env(server.url, MEMPALACE_REMOTE_TOKEN=TOKEN)
    done = bridge_in_process(monkeypatch, capsys, env, "call", "mempalace_status", "{}")
    assert done.returncode != 0
    assert "palace-bridge:" in done.stderr
    assert TOKEN not in done.stdout + done.stderr
    assert REDACTED in done.stderr


def test_a_token_split_across_stderr_reads_is_still_redacted(tmp_path):
    """Medium item: the child's stderr is forwarded (debug mode) per read; the token is written
    in two parts with a pause between, so the two halves arrive in two reads."""
    scenario = Scenario(tmp_path)
    real = scenario.bin / "mempalace-mcp-real"
    (scenario.bin / "mempalace-mcp").rename(real)
    half = len(TOKEN) // 2
    wrapper = scenario.bin / "mempalace-mcp"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"printf '%s' 'child says {TOKEN[:half]}' >&2\n"
        "sleep 0.3\n"
        f"printf '%s\\n' '{TOKEN[half:]} and goes on' >&2\n"
        f"exec '{real}' \"$@\"\n")
    wrapper.chmod(0o755)
    lines: list[str] = []
    client = create_client({**scenario.env, "MEMPALACE_EXT_DEBUG": "1",
                            "MEMPALACE_REMOTE_TOKEN": TOKEN}, stderr=lines.append)

    async def main() -> None:
        assert await client.start()
        await client.stop()

    run(main())
    text = "".join(lines)
    assert f"child says {REDACTED} and goes on" in text
    assert TOKEN[:half] not in text and TOKEN[half:] not in text


@pytest.mark.parametrize("cut", [1, 7, len(TOKEN) - 1])
def test_the_guard_redacts_a_token_cut_at_any_point_and_holds_back_only_a_prefix(cut):
    stream = io.StringIO()
    log = Log(stream, debug=True, secrets=(TOKEN,))
    guard = SplitSecretGuard(log.secrets)
    text = "x" * (64 * 1024 - cut) + TOKEN + " tail"
    first, second = text[:64 * 1024], text[64 * 1024:]
    log.raw(guard.feed(first))
    assert stream.getvalue() == "x" * (64 * 1024 - cut), "only the token's start is held back"
    log.raw(guard.feed(second))
    log.raw(guard.flush())
    assert stream.getvalue() == "x" * (64 * 1024 - cut) + REDACTED + " tail"


@pytest.mark.parametrize("token", ["zq-7c41d9e2zq", "a1b2c3a"])
def test_a_token_that_ends_as_it_starts_is_redacted_when_a_read_ends_with_it(token):
    """Its end could start it again: holding that end back must not cut the token open (the
    rest would be forwarded unredacted), so the guard redacts before it cuts."""
    stream = io.StringIO()
    log = Log(stream, debug=True, secrets=(token,))
    guard = SplitSecretGuard(log.secrets)
    log.raw(guard.feed("before " + token))
    log.raw(guard.feed(" after\n"))
    log.raw(guard.flush())
    assert stream.getvalue() == f"before {REDACTED} after\n"


def test_the_guard_holds_back_nothing_that_cannot_start_the_token():
    """Forwarded stderr goes out as it is read: only a possible start of the token waits."""
    guard = SplitSecretGuard((TOKEN,))
    assert guard.feed("a whole line\n") == "a whole line\n"
    assert guard.feed("no token ends here") == "no token ends here"
    assert guard.flush() == ""


def test_the_guard_lets_a_lookalike_go_at_the_end_of_the_stream():
    guard = SplitSecretGuard((TOKEN,))
    assert guard.feed("ends with " + TOKEN[:5]) == "ends with "
    assert guard.flush() == TOKEN[:5]
