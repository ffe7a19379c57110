"""Helpers for the HTTP fake's tests: spawn ``palace-conformance fake http``, talk raw HTTP.

Every fake runs as a real subprocess with its own HOME (the writer lease lives there), an
ephemeral port and its own journal, so tests are parallel-safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11
import httpx

from palace_conformance.fake.journal import read_journal

START_SECONDS = 15.0
LAUNCH = "from palace_conformance.cli import main; main()"


@dataclass
class Fake:
    """A running ``palace-conformance fake http`` process."""

    proc: subprocess.Popen[bytes]
    home: Path
    journal_path: Path
    stderr_path: Path
    port: int
    _client: httpx.Client | None = None

    @property
    def http(self) -> httpx.Client:
        """One client per fake (a fresh ``httpx.post`` builds an SSL context every time)."""
        if self._client is None:
            self._client = httpx.Client(timeout=10)
        return self._client

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def records(self, kind: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        records = read_journal(self.journal_path)[since:]
        return [r for r in records if kind is None or r.get("kind") == kind]

    def mark(self) -> int:
        return len(read_journal(self.journal_path))

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def post(self, message: Any, **kwargs: Any) -> httpx.Response:
        content = message if isinstance(message, bytes) else json.dumps(message).encode()
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream", **kwargs.pop("headers", {})}
        timeout = kwargs.pop("timeout", 10)
        return self.http.post(self.url, content=content, headers=headers, timeout=timeout,
                              **kwargs)

    def control(self, method: str, path: str, body: Any = None) -> httpx.Response:
        content = None if body is None else json.dumps(body).encode()
        return self.http.request(method, f"{self.base}/_fake/{path}", content=content)

    def arm(self, *faults: dict[str, Any]) -> list[str]:
        answer = self.control("POST", "faults", list(faults))
        assert answer.status_code == 200, answer.text
        return answer.json()["armed"]

    def stop(self) -> int:
        if self._client is not None:
            self._client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def fake_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_FAKE_", "MEMPALACE_"))}
    env["HOME"] = str(home)
    env.update(extra or {})
    return env


def launch(tmp: Path, *args: str, env: dict[str, str] | None = None,
           home: Path | None = None) -> subprocess.Popen[bytes]:
    """Start the fake without waiting; stderr goes to ``tmp/stderr.txt``."""
    home = home or tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    # initialised unless the test hands it a state, as the kit's worlds do (only a fake
    # started by hand reads its start state off the disk)
    env = {"PALACE_FAKE_STATE": str(tmp / f"state-{uuid.uuid4().hex[:8]}.json"), **(env or {})}
    with open(tmp / "stderr.txt", "wb") as err:
        return subprocess.Popen([sys.executable, "-c", LAUNCH, "fake", "http", *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                env=fake_env(home, env))


def start_fake(tmp: Path, *args: str, env: dict[str, str] | None = None,
               home: Path | None = None) -> Fake:
    """Start a fake on an ephemeral port and wait for its ready file."""
    tmp.mkdir(parents=True, exist_ok=True)
    ready = tmp / "ready.json"
    journal = tmp / "journal.jsonl"
    proc = launch(tmp, "--port", "0", "--ready-file", str(ready), "--journal", str(journal),
                  *args, env=env, home=home)
    deadline = time.monotonic() + START_SECONDS
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"fake http did not start (rc={proc.poll()}): "
                                 f"{(tmp / 'stderr.txt').read_text()}")
        time.sleep(0.02)
    info = json.loads(ready.read_text())
    return Fake(proc, home or tmp / "home", journal, tmp / "stderr.txt", int(info["port"]))


@contextlib.contextmanager
def running_fake(tmp: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Fake]:
    fake = start_fake(tmp, *args, env=env)
    try:
        yield fake
    finally:
        fake.stop()


# -- raw sockets --------------------------------------------------------------------------


@dataclass
class RawReply:
    data: bytes
    reset: bool  # the connection ended with ECONNRESET rather than a clean EOF


def raw_exchange(port: int, data: bytes, *, timeout: float = 5.0,
                 half_close: bool = False) -> RawReply:
    """Send bytes on a fresh connection and collect everything until EOF or reset."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return RawReply(b"".join(chunks), True)
            if not chunk:
                return RawReply(b"".join(chunks), False)
            chunks.append(chunk)


def request_bytes(method: str, target: str, port: int, body: bytes = b"",
                  headers: list[tuple[str, str]] | None = None) -> bytes:
    given = headers or []
    lines = [f"{method} {target} HTTP/1.1"]
    if not any(name.lower() == "host" for name, _ in given):
        lines.append(f"Host: 127.0.0.1:{port}")
    if not any(name.lower() in ("content-length", "transfer-encoding") for name, _ in given):
        given = [*given, ("Content-Length", str(len(body)))]
    lines += [f"{name}: {value}" for name, value in given]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class Parsed:
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    complete: bool  # the whole framed body arrived

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name.lower()), None)


def parse_response(data: bytes, method: str = "GET") -> Parsed:
    """Parse one HTTP/1.1 response with h11 (raises h11.RemoteProtocolError if malformed).

    ``method`` is the request's, since the answer to HEAD has headers but never a body.
    """
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    conn.receive_data(b"")
    head: h11.Response | None = None
    body = b""
    while True:
        event = conn.next_event()
        if isinstance(event, h11.Response):
            head = event
        elif isinstance(event, h11.Data):
            body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed) or event is h11.NEED_DATA:
            break
        elif isinstance(event, h11.InformationalResponse):
            continue
    if head is None:
        raise h11.RemoteProtocolError("no response head")
    return Parsed(head.status_code, head.reason.decode("latin-1"),
                  [(k.decode("latin-1"), v.decode("latin-1")) for k, v in head.headers], body,
                  isinstance(event, h11.EndOfMessage))


def wait_for(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def sse_events(body: bytes) -> list[dict[str, str]]:
    """Split an event-stream body into events ({"comment"} or {"id", "event", "data", "retry"})."""
    events = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        event: dict[str, str] = {}
        for line in block.split("\n"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            key = field or "comment"
            event[key] = event[key] + "\n" + value if key == "data" and key in event else value
        events.append(event)
    return events


def fired_conns(fake: Fake, fault_id: str, since: int = 0) -> list[int]:
    """The connection numbers whose message fired ``fault_id`` (from the journal alone)."""
    conns = []
    last_conn = None
    for record in fake.records(since=since):
        if record.get("kind") == "recv":
            last_conn = record.get("conn")
        elif record.get("kind") == "fault" and record.get("fault_id") == fault_id:
            conns.append(last_conn)
    return conns


def conn_of(fake: Fake, predicate: Callable[[dict[str, Any]], bool], since: int = 0) -> list[int]:
    """Connection numbers of ``recv`` records that match."""
    return [r["conn"] for r in fake.records("recv", since) if predicate(r)]


def ping(request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


def call(tool: str, arguments: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments or {}}}


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "0"}}}
