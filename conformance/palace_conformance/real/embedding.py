"""A deterministic, offline, OpenAI-compatible embedding endpoint for the real mempalace.

Without an embedder the real server's first vector write downloads a model, which fails offline
(a normal result saying ``Name or service not known``), so writes and searches would prove
nothing. mempalace 3.11 accepts any OpenAI-compatible endpoint (``MEMPALACE_EMBEDDING_MODEL=
openai-compat``). This one hashes each word into a fixed-length vector, so equal texts get equal
vectors and texts sharing words land close: searches rank sensibly and every run is the same.
Standard library only; it binds loopback and answers only ``POST …/embeddings``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from palace_conformance.fake.vectors import DIMENSIONS, embed

__all__ = ["DIMENSIONS", "MODEL", "answer", "embed", "environment", "running_stub"]

#: the model name the palace records (``mempalace_embedder.json``); keep it fixed per palace
MODEL = "palace-conformance-hash-v1"
#: 3.11 sends at most 64 inputs; refuse absurd bodies instead of hashing them
MAX_BODY = 8 * 1024 * 1024


def answer(body: Any) -> tuple[int, dict[str, Any]]:
    """The status and JSON answer for one request body (already parsed)."""
    inputs = body.get("input") if isinstance(body, dict) else None
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not all(isinstance(x, str) for x in inputs):
        return 400, {"error": {"message": "input must be a string or a list of strings"}}
    rows = [{"object": "embedding", "index": i, "embedding": embed(text)}
            for i, text in enumerate(inputs)]
    return 200, {"object": "list", "data": rows, "model": body.get("model", MODEL)}


class _Handler(BaseHTTPRequestHandler):
    server_version = "palace-conformance-embedding"

    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/embeddings"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self._send(400, {"error": {"message": "bad Content-Length"}})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON"}})
            return
        self._send(*answer(body))

    def _send(self, status: int, payload: Mapping[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the stub's traffic is not the palace's and must not reach the run's stderr."""


@contextmanager
def running_stub() -> Iterator[str]:
    """Serve the stub on an ephemeral loopback port for the duration; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="embedding-stub", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def environment(url: str) -> dict[str, str]:
    """The variables that point a real mempalace at the stub at ``url``."""
    return {
        "MEMPALACE_EMBEDDING_MODEL": "openai-compat",
        "MEMPALACE_EMBEDDING_API_URL": url,
        "MEMPALACE_EMBEDDING_API_MODEL": MODEL,
    }
