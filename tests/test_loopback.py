"""The one readiness wait of the servers the kit starts: true only on a 200 from /healthz, and
false, within its deadline, when the server died or never answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from palace_conformance.loopback import free_port, wait_healthy


@contextmanager
def _server(status: int) -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status if self.path == "/healthz" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_a_200_is_ready() -> None:
    with _server(200) as port:
        assert wait_healthy(port, 10.0, lambda: True)


def test_another_status_is_not_ready_by_the_deadline() -> None:
    with _server(503) as port:
        began = time.monotonic()
        assert not wait_healthy(port, 0.5, lambda: True)
        assert time.monotonic() - began >= 0.5


def test_a_dead_server_ends_the_wait_at_once() -> None:
    began = time.monotonic()
    assert not wait_healthy(free_port(), 30.0, lambda: False)
    assert time.monotonic() - began < 30.0


def test_free_port_is_bindable() -> None:
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
