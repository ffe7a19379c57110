"""``subject: fake`` scenarios: the runner itself is the client and the fake is under test.

FAKE-* fidelity checks send JSON-RPC messages (or raw lines) straight to the fake, over the same
transports a bridge would use: a ``mempalace-mcp`` child on pipes, or POSTs to the HTTP fake. The
reply (``None`` when none came, e.g. for a notification) becomes the step's result.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
from typing import Any

import httpx

from . import procs
from .world import World

RAW_WAIT_MS = 2000  # a raw line may get no answer; do not wait the whole deadline for nothing
NOTIFICATION_WAIT_MS = 100  # a fake that answers a notification must be caught

_EOF = object()


class FakeClient:
    """Talks to the run's fake on the run's transport. :meth:`close` always cleans up."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[Any] = queue.Queue()
        self._http: httpx.Client | None = None
        self._session: str | None = None
        if world.transport == "stdio":
            self._spawn()
        else:
            self._http = httpx.Client(timeout=30)

    def _spawn(self) -> None:
        with open(self.world.fake_stderr, "ab") as err:
            self.proc = subprocess.Popen([str(self.world.bin / "mempalace-mcp")],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, env=self.world.fake_env(),
                                         cwd=self.world.root, start_new_session=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self._lines.put(line)
        self._lines.put(_EOF)

    def send(self, step_params: dict[str, Any], deadline_ms: float) -> tuple[bool, Any,
                                                                             dict[str, Any] | None]:
        """One ``rpc`` step: ``(ok, reply, error)``."""
        message = step_params.get("message")
        raw = step_params.get("raw")
        if self.world.transport == "stdio":
            return self._send_stdio(message, raw, deadline_ms)
        return self._send_http(message, raw, deadline_ms)

    # -- stdio -------------------------------------------------------------------------------

    def _send_stdio(self, message: Any, raw: Any,
                    deadline_ms: float) -> tuple[bool, Any, dict[str, Any] | None]:
        assert self.proc is not None and self.proc.stdin is not None
        while not self._lines.empty():  # a line nobody asked for would answer the wrong step
            stray = self._lines.get_nowait()
            if stray is _EOF:
                self._lines.put(_EOF)
                break
        data = (raw if raw is not None else json.dumps(message)).encode() + b"\n"
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except OSError:
            return False, None, {"kind": "connection_closed", "message": "the fake has exited"}
        if raw is not None:
            wait = min(deadline_ms, RAW_WAIT_MS)
        elif isinstance(message, dict) and "id" in message and "method" in message:
            wait = deadline_ms
        else:
            wait = NOTIFICATION_WAIT_MS
        try:
            line = self._lines.get(timeout=wait / 1000)
        except queue.Empty:
            if wait == deadline_ms:
                return False, None, {"kind": "timeout",
                                     "message": f"no reply within {deadline_ms:.0f} ms"}
            return True, None, None
        if line is _EOF:
            self._lines.put(_EOF)
            return False, None, {"kind": "connection_closed", "message": "the fake exited"}
        try:
            return True, json.loads(line), None
        except json.JSONDecodeError:
            return False, line.decode("utf-8", "replace"), {
                "kind": "protocol", "message": "the fake wrote a line that is not JSON"}

    # -- http --------------------------------------------------------------------------------

    def _send_http(self, message: Any, raw: Any,
                   deadline_ms: float) -> tuple[bool, Any, dict[str, Any] | None]:
        assert self._http is not None and self.world.fake_url is not None
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        token = self.world.scenario.http.token
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if self._session is not None:
            headers["Mcp-Session-Id"] = self._session
        body = raw if raw is not None else json.dumps(message)
        try:
            answer = self._http.post(self.world.fake_url, content=body.encode(), headers=headers,
                                     timeout=deadline_ms / 1000)
        except httpx.TimeoutException:
            return False, None, {"kind": "timeout",
                                 "message": f"no reply within {deadline_ms:.0f} ms"}
        except httpx.HTTPError as exc:
            return False, None, {"kind": "connection_closed", "message": str(exc)}
        session = answer.headers.get("mcp-session-id")
        if session:
            self._session = session
        if answer.status_code == 202 or not answer.content:
            return True, None, None
        kind = answer.headers.get("content-type", "")
        if "text/event-stream" in kind:
            return True, _last_event(answer.text), None
        try:
            return True, answer.json(), None
        except ValueError:
            return False, answer.text, {"kind": "http_error", "message": "body is not JSON",
                                        "data": {"status": answer.status_code}}

    def kill(self, signum: int) -> tuple[bool, Any, dict[str, Any] | None]:
        if self.proc is None or self.proc.poll() is not None:
            return False, None, {"kind": "bad_request", "message": "no live fake process"}
        self.proc.send_signal(signum)
        return True, {"pid": self.proc.pid}, None

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        if self.proc is not None:
            if self.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                procs.stop(self.proc, grace_s=1.0)
            if self.proc.stdout is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdout.close()


def _last_event(text: str) -> Any:
    """The last JSON-RPC response carried by an event stream (progress events come first)."""
    found: Any = None
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.split("\n")
                         if line.startswith("data:"))
        if not data.strip():
            continue
        try:
            message = json.loads(data)
        except json.JSONDecodeError:
            continue
        if isinstance(message, dict) and ("result" in message or "error" in message):
            found = message
    return found
