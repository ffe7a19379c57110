"""``subject: fake`` scenarios: the runner itself is the client and the fake is under test.

FAKE-* fidelity checks send JSON-RPC messages (or raw lines) straight to the fake, over the same
transports a bridge would use: a ``mempalace-mcp`` child on pipes, or POSTs to the HTTP fake. The
reply (``None`` when none came, e.g. for a notification) becomes the step's result. ``http`` steps
send one HTTP request exactly as written (any method, path and headers), because the HTTP checks
(routes, limits, the Host/Origin/token order) are about requests no JSON-RPC client would send.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import subprocess
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from palace_conformance import processes as procs
from palace_conformance.runner.execution.world import World

RAW_WAIT_MS = 2000  # a raw line may get no answer; do not wait the whole deadline for nothing
NOTIFICATION_WAIT_MS = 100  # a fake that answers a notification must be caught
HTTP_BODY_LIMIT = 64 * 1024  # an http step's result keeps this much of the body
_FILL = b"x" * 65536  # what a ``body_size`` body is made of, sent a chunk at a time

#: a step's outcome: (ok, result, error)
Outcome = tuple[bool, Any, dict[str, Any] | None]

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
            # plain HTTP to loopback: no TLS, so no CA bundle to load (~40 ms of CPU each)
            self._http = httpx.Client(timeout=30, verify=False)

    def _spawn(self) -> None:
        why = self.world.tampered()  # never start a shim that changed since the world sealed it
        if why:
            raise OSError(why)
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
        except (OSError, ValueError):  # ValueError: stdin was closed by a close_stdin step
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

    def request(self, params: Mapping[str, Any], deadline_ms: float) -> Outcome:
        """One ``http`` step: any response is ok; only a dead or silent connection is not."""
        url = urlsplit(self.world.fake_url or "")
        if self.world.transport != "http" or url.hostname is None:
            return False, None, {"kind": "bad_request", "message": "an http step needs the "
                                 "HTTP fake; this run is on stdio"}
        given = {str(k): str(v) for k, v in (params.get("headers") or {}).items()}
        names = {name.lower() for name in given}
        headers: list[tuple[str, str]] = []
        if "host" not in names:
            headers.append(("Host", url.netloc))
        token = self.world.scenario.http.token
        if params.get("auth", True) and token is not None and "authorization" not in names:
            headers.append(("Authorization", f"Bearer {token}"))
        headers.extend(given.items())
        body = params.get("body")
        size = len(body.encode()) if isinstance(body, str) else params.get("body_size")
        if size is not None and not names & {"content-length", "transfer-encoding"}:
            headers.append(("Content-Length", str(size)))
        connection = http.client.HTTPConnection(url.hostname, url.port,
                                                timeout=deadline_ms / 1000)
        result: dict[str, Any] | None = None
        try:
            connection.putrequest(str(params["method"]), str(params.get("path", "/mcp")),
                                  skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.endheaders()
            _send_body(connection, body, size)
            answer = connection.getresponse()
            seen: dict[str, str] = {}
            for name, value in answer.getheaders():
                key = name.lower()
                seen[key] = f"{seen[key]}, {value}" if key in seen else value
            result = {"status": answer.status, "headers": seen, "body": ""}
            result["body"] = _read_body(answer).decode("utf-8", "replace")
            return True, result, None
        except TimeoutError:
            return False, result, {"kind": "timeout",
                                   "message": f"no HTTP response within {deadline_ms:.0f} ms"}
        except OSError as exc:  # refused, reset, closed before a status line
            return False, result, {"kind": "connection_closed",
                                   "message": f"{type(exc).__name__}: {exc}"}
        except http.client.HTTPException as exc:
            return False, result, {"kind": "protocol",
                                   "message": f"not an HTTP response: {type(exc).__name__}"}
        except ValueError as exc:  # a method, path or header http.client will not send
            return False, None, {"kind": "bad_request", "message": str(exc)}
        finally:
            connection.close()

    def close_stdin(self, wait_ms: float) -> Outcome:
        """``server close_stdin``: EOF on the child's stdin, then wait for it to exit by itself."""
        if self.proc is None:
            return False, None, {"kind": "bad_request",
                                 "message": "close_stdin needs the stdio fake; this run is on http"}
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            code = self.proc.wait(wait_ms / 1000)
        except subprocess.TimeoutExpired:
            return False, None, {"kind": "timeout", "message": f"the fake was still running "
                                 f"{wait_ms:.0f} ms after its stdin closed"}
        return True, {"exit_code": code}, None

    def kill(self, signum: int) -> tuple[bool, Any, dict[str, Any] | None]:
        if self.proc is None or self.proc.poll() is not None:
            return False, None, {"kind": "bad_request", "message": "no live fake process"}
        self.proc.send_signal(signum)
        return True, {"pid": self.proc.pid}, None

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        if self.proc is not None:
            if not procs.ended_by_eof(self.proc, 3):
                procs.stop(self.proc, grace_s=1.0)
            if self.proc.stdout is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdout.close()


def _send_body(connection: http.client.HTTPConnection, body: str | None,
               size: int | None) -> None:
    """The step's body; a fake that answers early (413) may stop reading, so a broken pipe here
    is left for the response read to judge."""
    try:
        if body is not None:
            connection.send(body.encode())
            return
        left = size or 0
        while left > 0:
            chunk = _FILL[:left]
            connection.send(chunk)
            left -= len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass


def _read_body(answer: http.client.HTTPResponse) -> bytes:
    """The first :data:`HTTP_BODY_LIMIT` bytes of the body (a cut body: what arrived)."""
    try:
        return answer.read(HTTP_BODY_LIMIT)
    except http.client.IncompleteRead as exc:
        return exc.partial[:HTTP_BODY_LIMIT]


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
