"""Whatever arrives on the socket, the fake answers well-formed HTTP (or hangs up) and lives on."""

from __future__ import annotations

import json
import string
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from .http_support import Fake, parse_response, raw_exchange, request_bytes, start_fake

READ_SECONDS = 5.0

def mostly(common: st.SearchStrategy[str], odd: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Three draws in four from ``common``, so most requests get past the early checks."""
    return st.one_of(common, common, common, odd)


methods = mostly(st.sampled_from(["POST", "POST", "GET", "DELETE", "PUT", "OPTIONS", "HEAD"]),
                 st.text(string.ascii_letters + "-_!", min_size=1, max_size=8))
paths = mostly(st.sampled_from(["/mcp", "/mcp", "/mcp", "/healthz", "/_fake/journal",
                                "/_fake/sessions/forget", "/_fake/reset", "/nope", "*",
                                "/mcp?x=1", "//mcp"]),
               st.text(string.ascii_letters + string.digits + "/%?&=._~-", max_size=30).map(
                   lambda s: "/" + s))
header_names = st.sampled_from([
    "Host", "Origin", "Authorization", "Content-Type", "Mcp-Session-Id", "Last-Event-ID",
    "Accept", "Connection", "MCP-Protocol-Version", "Expect", "X-Junk",
]) | st.text(string.ascii_letters + "-", min_size=1, max_size=12).filter(
    lambda name: name.lower() not in ("content-length", "transfer-encoding"))
header_values = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF,
                                      exclude_characters="\r\n\x7f"), max_size=40)
json_rpc = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0", ""]),
    "id": st.none() | st.integers() | st.text(max_size=6),
    "method": st.sampled_from(["ping", "initialize", "tools/list", "tools/call",
                               "notifications/initialized", "server/discover"])
    | st.text(max_size=10),
    "params": st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5),
                              max_size=3) | st.lists(st.integers(), max_size=3),
    "result": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
})
bodies = st.binary(max_size=300) | json_rpc.map(lambda m: json.dumps(m).encode()) | st.lists(
    json_rpc, max_size=3).map(lambda m: json.dumps(m).encode())


@st.composite
def requests(draw: st.DrawFn, port: int) -> tuple[bytes, bool]:
    """(bytes to send, whether to half-close after sending)."""
    kind = draw(st.sampled_from(["junk", "mcp", "mcp", "any", "any"]))
    if kind == "junk":  # raw bytes, maybe dressed as the start of a request
        prefix = draw(st.sampled_from([b"", b"POST /mcp HTTP/1.1\r\n", b"GET / HTTP/1.0\r\n\r\n"]))
        return prefix + draw(st.binary(max_size=200)), True
    headers = draw(st.lists(st.tuples(header_names, header_values), max_size=5))
    if kind == "mcp":  # a plausible JSON-RPC POST that gets past the checks to the palace
        method, path = "POST", "/mcp"
        headers = [(name, value) for name, value in headers
                   if name.lower() not in ("host", "origin", "authorization", "mcp-session-id")]
        body = json.dumps(draw(json_rpc | st.lists(json_rpc, max_size=2))).encode()
    else:
        method, path, body = draw(methods), draw(paths), draw(bodies)
        if draw(st.integers(0, 4)):  # mostly a good Host, so requests get past the pin
            good = f"127.0.0.1:{port}"
            headers.insert(0, ("Host", draw(st.sampled_from(
                [good, good, good, "localhost", "evil.example", "[::1]", ""]))))
        if draw(st.integers(0, 5)) == 0:
            headers.append(("Transfer-Encoding", "chunked"))
            body = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n" if body else b"0\r\n\r\n"
    return request_bytes(method, path, port, body, headers), False


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fake]:
    server = start_fake(tmp_path_factory.mktemp("http-fuzz"))
    yield server
    server.stop()


def healthy(fake: Fake) -> bool:
    data = request_bytes("GET", "/healthz", fake.port)
    return parse_response(raw_exchange(fake.port, data).data).body == b"ok\n"


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_any_input_gets_well_formed_http_or_a_hang_up_and_the_server_lives(
        fake: Fake, data: st.DataObject) -> None:
    payload, half_close = data.draw(requests(fake.port))
    reply = raw_exchange(fake.port, payload, timeout=READ_SECONDS, half_close=half_close)
    if reply.data:
        head_only = payload.startswith(b"HEAD ")
        answer = parse_response(reply.data, "HEAD" if head_only else "GET")
        event(f"status {answer.status}")
        assert 100 <= answer.status <= 599
        assert answer.complete, "the body must match its framing"
        assert answer.header("connection") == "close"
    assert healthy(fake)
    assert fake.proc.poll() is None
