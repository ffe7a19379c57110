"""FAKE-05: the fake's stateless HTTP transport answers like mempalace 3.11's ``serve``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .http_support import (
    INITIALIZE,
    Fake,
    parse_response,
    ping,
    raw_exchange,
    request_bytes,
    start_fake,
)

JSON_TYPE = "application/json; charset=utf-8"
TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fake]:
    server = start_fake(tmp_path_factory.mktemp("http-open"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fake]:
    server = start_fake(tmp_path_factory.mktemp("http-token"), "--token", TOKEN)
    yield server
    server.stop()


def raw(fake: Fake, method: str, target: str, body: bytes = b"",
        headers: list[tuple[str, str]] | None = None):
    reply = raw_exchange(fake.port, request_bytes(method, target, fake.port, body, headers))
    return parse_response(reply.data)


# -- POST /mcp -------------------------------------------------------------------------------


def test_a_request_gets_a_200_json_body_with_length_and_connection_close(fake: Fake) -> None:
    answer = raw(fake, "POST", "/mcp", json.dumps(INITIALIZE).encode(),
                 [("Content-Type", "application/json")])
    assert answer.status == 200 and answer.complete
    assert answer.header("content-type") == JSON_TYPE
    assert answer.header("content-length") == str(len(answer.body))
    assert answer.header("connection") == "close"
    assert answer.header("server") == "BaseHTTP/0.6 Python/3.11.7"
    assert answer.body == (b'{"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": '
                           b'"2025-06-18", "capabilities": {"tools": {}}, "serverInfo": '
                           b'{"name": "mempalace", "version": "3.11.0"}}}')


def test_json_rpc_errors_still_travel_as_200(fake: Fake) -> None:
    answer = fake.post({"jsonrpc": "2.0", "id": 6, "method": "resources/list"})
    assert answer.status_code == 200
    assert answer.json()["error"] == {"code": -32601, "message": "Unknown method: resources/list"}


def test_a_notification_gets_202_and_an_empty_body(fake: Fake) -> None:
    answer = raw(fake, "POST", "/mcp", b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert (answer.status, answer.body, answer.header("content-length")) == (202, b"", "0")
    assert answer.header("connection") == "close"


def test_bad_json_gets_400_with_a_parse_error(fake: Fake) -> None:
    answer = fake.post(b"{not json")
    assert answer.status_code == 400
    assert answer.headers["content-type"] == JSON_TYPE
    assert answer.content == (b'{"jsonrpc": "2.0", "id": null, "error": '
                              b'{"code": -32700, "message": "Parse error"}}')


def test_a_chunked_body_gets_400_and_never_reaches_the_palace(fake: Fake) -> None:
    mark = fake.mark()
    body = json.dumps(ping(5)).encode()
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    answer = raw(fake, "POST", "/mcp", chunked, [("Transfer-Encoding", "chunked")])
    assert answer.status == 400
    assert json.loads(answer.body)["error"]["code"] == -32700
    assert fake.records("recv", mark) == []


def test_a_batch_is_refused_inside_a_200(fake: Fake) -> None:
    answer = fake.post([ping(7)])
    assert answer.status_code == 200
    assert answer.json() == {"jsonrpc": "2.0", "id": None,
                             "error": {"code": -32600, "message": "Invalid Request"}}


def test_over_16_mib_declared_gets_413_before_the_body_is_read(fake: Fake) -> None:
    data = request_bytes("POST", "/mcp", fake.port, b"{}",
                         [("Content-Length", str(16 * 1024 * 1024 + 1))])
    answer = parse_response(raw_exchange(fake.port, data).data)
    assert answer.status == 413 and answer.reason == "Request Entity Too Large"
    assert answer.body == (b'{"jsonrpc": "2.0", "id": null, "error": '
                           b'{"code": -32600, "message": "Request too large"}}')


def test_a_client_answer_to_a_server_request_it_never_sent_is_a_method_error(fake: Fake) -> None:
    answer = fake.post({"jsonrpc": "2.0", "id": 99, "result": {}})
    assert answer.status_code == 200
    assert answer.json()["error"]["code"] == -32601


# -- other routes and methods ----------------------------------------------------------------


def test_get_mcp_is_a_404_stock_page(fake: Fake) -> None:
    answer = fake.http.get(fake.url, headers={"Accept": "text/event-stream"})
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "text/html;charset=utf-8"
    assert "<p>Message: Not Found.</p>" in answer.text
    assert answer.headers["content-length"] == "330"


@pytest.mark.parametrize("method", ["DELETE", "PUT", "OPTIONS", "PATCH"])
def test_methods_without_a_handler_get_501(fake: Fake, method: str) -> None:
    answer = raw(fake, method, "/mcp", headers=[("Mcp-Session-Id", "deadbeef")])
    assert answer.status == 501
    assert answer.reason == f"Unsupported method ('{method}')"
    assert f"<p>Message: Unsupported method ('{method}').</p>".encode() in answer.body
    assert not any(k.startswith("access-control") for k, _ in answer.headers)


def test_head_gets_the_501_headers_without_a_body(fake: Fake) -> None:
    reply = raw_exchange(fake.port, request_bytes("HEAD", "/healthz", fake.port))
    answer = parse_response(reply.data, "HEAD")
    assert answer.status == 501 and answer.body == b"" and answer.complete
    assert reply.data.endswith(b"\r\n\r\n")
    assert int(answer.header("content-length") or 0) > 0


def test_expect_100_continue_gets_its_interim_answer(fake: Fake) -> None:
    data = request_bytes("POST", "/mcp", fake.port, json.dumps(ping(3)).encode(),
                         [("Expect", "100-continue")])
    reply = raw_exchange(fake.port, data).data
    assert reply.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert parse_response(reply).body == b'{"jsonrpc": "2.0", "id": 3, "result": {}}'


def test_healthz_is_plain_ok(fake: Fake) -> None:
    answer = raw(fake, "GET", "/healthz")
    assert answer.status == 200
    assert answer.body == b"ok\n"
    assert answer.header("content-type") == "text/plain; charset=utf-8"
    assert answer.header("content-length") == "3"


def test_unknown_paths_are_404(fake: Fake) -> None:
    assert fake.post(ping()).status_code == 200
    assert fake.http.post(f"{fake.base}/other", content=b"{}").status_code == 404
    assert fake.http.get(f"{fake.base}/nope").status_code == 404


@pytest.mark.parametrize(("target", "status"), [
    ("//mcp", 200), ("///mcp?x=1", 200), ("//healthz", 200), ("//a]b/c", 404),
    ("//[::1/mcp", 404), ("//x/mcp", 404)])
def test_a_target_starting_with_two_slashes_is_routed_as_one_slash(
        fake: Fake, target: str, status: int) -> None:
    """Found by the volume fuzz: Python's ``BaseHTTPRequestHandler`` (mempalace's server)
    collapses leading slashes before mempalace reads ``urlparse(path).path`` (gh-87389), so
    ``//mcp`` is ``/mcp`` there. The fake read ``//mcp`` as a host with an empty path (404),
    and ``//a]b`` as a bad IPv6 host: its catch-all 500."""
    method = "GET" if "healthz" in target else "POST"
    answer = raw(fake, method, target, json.dumps(ping()).encode())
    assert answer.status == status, answer
    if status == 200 and method == "POST":
        assert json.loads(answer.body) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert "HTTP handler error" not in fake.stderr()


def test_every_connection_carries_one_response_then_closes(fake: Fake) -> None:
    one = request_bytes("POST", "/mcp", fake.port, json.dumps(ping(1)).encode())
    two = request_bytes("POST", "/mcp", fake.port, json.dumps(ping(2)).encode())
    reply = raw_exchange(fake.port, one + two)
    assert not reply.reset
    assert reply.data.count(b"HTTP/1.1 ") == 1
    assert parse_response(reply.data).body == b'{"jsonrpc": "2.0", "id": 1, "result": {}}'


@pytest.mark.parametrize(("target", "method"), [("/mcp", "POST"), ("/mcp", "GET"),
                                                ("/healthz", "GET"), ("/x", "POST")])
def test_every_response_says_connection_close_and_gives_a_length(fake: Fake, target: str,
                                                                 method: str) -> None:
    answer = raw(fake, method, target, json.dumps(ping()).encode())
    assert answer.header("connection") == "close"
    assert answer.header("content-length") == str(len(answer.body))


# -- Host and Origin -------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1", "[::1]:{port}", "LOCALHOST",
                                  "::1"])
def test_loopback_hosts_are_allowed(fake: Fake, host: str) -> None:
    answer = fake.post(ping(), headers={"Host": host.format(port=fake.port)})
    assert answer.status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1:9999", "localhost:1", "[::1]:{other}"])
def test_a_loopback_name_with_another_port_is_403(fake: Fake, host: str) -> None:
    """mempalace 3.11 pins Host to the port it bound (research: mempalace-3.11-semantics.md §6):
    a client behind a port forward or a proxy is refused on every request."""
    other = fake.port + 1 if fake.port < 65535 else fake.port - 1
    answer = fake.post(ping(), headers={"Host": host.format(other=other)})
    assert answer.status_code == 403


@pytest.mark.parametrize("target", ["/mcp", "/healthz", "/nope"])
def test_a_foreign_host_is_403_on_every_route(fake: Fake, target: str) -> None:
    method = "POST" if target == "/mcp" else "GET"
    data = f"{method} {target} HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 2\r\n\r\n{{}}"
    answer = parse_response(raw_exchange(fake.port, data.encode()).data)
    assert answer.status == 403
    assert b"<p>Message: Forbidden.</p>" in answer.body


@pytest.mark.parametrize(("origin", "status"), [
    ("https://evil.example", 403), ("null", 403), ("http://localhost:3000", 200),
    ("http://127.0.0.1", 200), ("http://[::1]:9", 200),
])
def test_origin_must_be_loopback_when_present(fake: Fake, origin: str, status: int) -> None:
    assert fake.post(ping(), headers={"Origin": origin}).status_code == status
    assert fake.http.get(f"{fake.base}/healthz", headers={"Origin": origin}).status_code == status


# -- the token -------------------------------------------------------------------------------


def test_no_token_is_401_stock_html_without_www_authenticate(locked: Fake) -> None:
    answer = locked.post(ping())
    assert answer.status_code == 401
    assert answer.headers["content-type"] == "text/html;charset=utf-8"
    assert "<p>Error code: 401</p>" in answer.text
    assert "<p>Message: Unauthorized.</p>" in answer.text
    assert "www-authenticate" not in answer.headers
    assert answer.headers["connection"] == "close"


@pytest.mark.parametrize(("value", "status"), [
    (f"Bearer {TOKEN}", 200), (f"bearer {TOKEN}", 401), (f"Bearer {TOKEN} ", 401),
    ("Bearer wrong", 401), (TOKEN, 401), (f"Bearer  {TOKEN}", 401),
])
def test_the_whole_header_must_equal_bearer_token(locked: Fake, value: str, status: int) -> None:
    raw_request = request_bytes("POST", "/mcp", locked.port, json.dumps(ping()).encode(),
                                [("Authorization", value)])
    assert parse_response(raw_exchange(locked.port, raw_request).data).status == status


def test_check_order_is_host_origin_token_path(locked: Fake) -> None:
    good = {"Authorization": f"Bearer {TOKEN}"}
    post = httpx.post
    assert post(locked.url, content=b"{}", headers={"Host": "evil.example"}).status_code == 403
    assert post(locked.url, content=b"{}",
                headers={"Origin": "https://evil.example"}).status_code == 403
    assert post(f"{locked.base}/other", content=b"{}").status_code == 401
    assert post(f"{locked.base}/other", content=b"{}", headers=good).status_code == 404
    assert post(locked.url, content=json.dumps(ping()), headers=good).status_code == 200


def test_healthz_and_unknown_gets_need_no_token(locked: Fake) -> None:
    assert locked.http.get(f"{locked.base}/healthz").text == "ok\n"
    assert locked.http.get(f"{locked.base}/nope").status_code == 404
    assert locked.http.get(locked.url).status_code == 404


@pytest.mark.parametrize("path", ["/statusz", "/logstream/stream", "/sync/version_vector",
                                  "/sync/ops?origin=x"])
def test_ops_gets_follow_the_token_like_3_11(locked: Fake, path: str) -> None:
    """mempalace 3.11 serves /statusz, the logstream and /sync/* only with the token (seen by
    palace-conformance fidelity: 401 without it); the fake models none of them, so with the
    token they are its 404."""
    assert locked.http.get(f"{locked.base}{path}").status_code == 401
    good = {"Authorization": f"Bearer {TOKEN}"}
    assert locked.http.get(f"{locked.base}{path}", headers=good).status_code == 404


def test_the_token_never_reaches_the_journal_or_stderr(locked: Fake) -> None:
    locked.post(ping(), headers={"Authorization": f"Bearer {TOKEN}"})
    locked.post(ping(), headers={"Authorization": "Bearer not-it"})
    text = locked.journal_path.read_text()
    assert TOKEN not in text and "not-it" not in text
    assert TOKEN not in locked.stderr()
    seen = [r["headers"].get("authorization") for r in locked.records("http_request")]
    assert "Bearer <redacted>" in seen


def test_the_token_can_come_from_the_environment(tmp_path: Path) -> None:
    fake = start_fake(tmp_path, env={"MEMPALACE_MCP_HTTP_TOKEN": "from-env"})
    try:
        assert fake.post(ping()).status_code == 401
        ok = fake.post(ping(), headers={"Authorization": "Bearer from-env"})
        assert ok.status_code == 200
    finally:
        fake.stop()


# -- the journal of a request ----------------------------------------------------------------


def test_each_request_is_journaled_as_request_recv_response_with_one_conn(fake: Fake) -> None:
    mark = fake.mark()
    fake.post(ping("j-1"))
    records = fake.records(since=mark)
    kinds = [r["kind"] for r in records]
    assert kinds[:4] == ["http_request", "recv", "send", "http_response"]
    conns = {r["conn"] for r in records[:4] if "conn" in r}
    assert len(conns) == 1
    request, recv, _, response = records[:4]
    assert (request["method"], request["path"]) == ("POST", "/mcp")
    assert recv["http"]["method"] == "POST" and recv["id"] == "j-1"
    assert response["status"] == 200 and response["headers"]["connection"] == "close"
    assert re.fullmatch(r"\d+", str(recv["conn"]))
