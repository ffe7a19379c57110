"""The HTTP proxy of a real-server world journals each exchange as the HTTP fake does and passes
the server its own Host (a stand-in upstream here: no real mempalace needed)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from palace_conformance.fake.journal import Journal, read_journal
from palace_conformance.real.journal_proxy import JournalProxy


class _Upstream(BaseHTTPRequestHandler):
    hosts: list[str] = []

    def do_POST(self) -> None:
        self.hosts.append(self.headers.get("Host", ""))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {"ok": True}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_an_exchange_is_journaled_in_the_fakes_order(tmp_path: Path, upstream: str) -> None:
    path = tmp_path / "journal.jsonl"
    proxy = JournalProxy(f"http://{upstream}/mcp", Journal(path, "http"))
    url = proxy.start()
    try:
        call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "mempalace_status", "arguments": {}}}
        answer = httpx.post(url, json=call, headers={"Authorization": "Bearer s3cret"},
                            timeout=10)
    finally:
        proxy.stop()
    assert answer.status_code == 200 and answer.json()["result"] == {"ok": True}
    assert _Upstream.hosts[-1] == upstream  # not the proxy's: a real server refuses that (403)
    records = read_journal(path)
    assert [r["kind"] for r in records] == ["http_request", "recv", "send", "http_response"]
    request, recv, send, response = records
    assert (request["method"], request["path"], request["conn"]) == ("POST", "/mcp", 1)
    assert request["headers"]["authorization"] == "Bearer <redacted>"
    assert "s3cret" not in path.read_text()
    assert (recv["method"], recv["tool"], recv["id"], recv["conn"]) == (
        "tools/call", "mempalace_status", 3, 1)
    assert recv["http"]["headers"]["authorization"] == "Bearer <redacted>"
    assert send["message"]["id"] == 3
    assert (response["status"], response["conn"]) == (200, 1)
