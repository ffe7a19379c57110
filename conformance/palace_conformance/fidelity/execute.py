"""Run a fidelity script against one target and record what it answers, point by point.

Every process started here is loopback-only, lives in its own process group (so it and only it
can be stopped), and every wait has a deadline. Observations are plain JSON: what a reply *was*
(JSON-RPC results with their text content decoded, HTTP status and selected headers, exit codes,
selected stderr lines); nothing is masked here, that is the rules' job (normalise.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from palace_conformance.fake.options import TOKEN_ENV
from palace_conformance.fidelity.script import Script, Session, Step
from palace_conformance.fidelity.targets import Target, World
from palace_conformance.loopback import free_port, wait_healthy

START_DEADLINE_S = 90.0
EXIT_DEADLINE_S = 20.0
#: headers whose value is compared; anything else is left out (Date, Server, ...)
OBSERVED_HEADERS = ("content-type", "connection", "mcp-session-id", "www-authenticate",
                    "access-control-allow-origin", "retry-after", "cache-control", "allow",
                    "transfer-encoding")

Observation = dict[str, Any]


def decode_message(line: str) -> Any:
    """One stdio/HTTP JSON-RPC message as observed: tool text blocks that hold JSON are parsed
    (so a diff shows the field that differs) with whether they were 2-space pretty-printed."""
    try:
        message = json.loads(line)
    except ValueError:
        return {"unparsed": line}
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict):
        return message
    content = result.get("content")
    if isinstance(content, list):
        decoded = []
        for block in content:
            text = block.get("text") if isinstance(block, dict) else None
            try:
                parsed = json.loads(text) if isinstance(text, str) else None
            except ValueError:
                parsed = None
            if parsed is None or not isinstance(text, str):
                decoded.append(block)
                continue
            pretty = text == json.dumps(parsed, indent=2, ensure_ascii=False)
            decoded.append({**{k: v for k, v in block.items() if k != "text"},
                            "json": parsed, "pretty_printed": pretty})
        result["content"] = decoded
    return message


class StdioServer:
    """One stdio server process: lines in, lines out through a reader thread, stderr kept."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=env, cwd=cwd,
                                        start_new_session=True)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump_out, daemon=True).start()
        self._err_thread = threading.Thread(target=self._pump_err, daemon=True)
        self._err_thread.start()
        self._sentinels = 0

    def _pump_out(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.decode("utf-8", "replace").rstrip("\r\n"))

    def exchange(self, payload: list[bytes], deadline_s: float) -> Observation:
        """Send the lines, then a sentinel ping; everything answered before the sentinel's
        answer is this step's (so silence and ``id: null`` answers are observed too)."""
        self._sentinels += 1
        sentinel = f"fidelity-sentinel-{self._sentinels}"
        ping = json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode()
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(b"".join(payload) + ping + b"\n")
            self.process.stdin.flush()
        except OSError as exc:
            return {"write_failed": type(exc).__name__}
        replies: list[Any] = []
        formats: list[bool] = []
        end = time.monotonic() + deadline_s
        while True:
            try:
                raw = self.lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                return {"replies": replies, "timed_out": True}
            if raw is None:
                return {"replies": replies, "stdout_closed": True}
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            try:
                plain = json.loads(text)
            except ValueError:
                plain = None
            if isinstance(plain, dict) and plain.get("id") == sentinel:
                observation: Observation = {"replies": replies}
                if formats:
                    observation["default_json_lines"] = all(formats)
                return observation
            formats.append(plain is not None and text == json.dumps(plain, ensure_ascii=False))
            replies.append(decode_message(text))

    def close(self, deadline_s: float = EXIT_DEADLINE_S) -> int | None:
        """Close stdin (EOF) and wait; the exit code, or None if it had to be killed."""
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        return self._exit_code(deadline_s)

    def terminate(self, deadline_s: float = EXIT_DEADLINE_S) -> int | None:
        """SIGTERM this server (the process itself, as a supervisor would) and wait; the exit
        code, or None if it had to be killed."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        return self._exit_code(deadline_s)

    def _exit_code(self, deadline_s: float) -> int | None:
        """Wait for the exit: its code once stderr is read, or None (killed) past the deadline."""
        try:
            code = self.process.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._err_thread.join(timeout=5)
        return code

    def kill(self) -> None:
        """SIGKILL this server's own process group (and nothing else)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=EXIT_DEADLINE_S)
        self._err_thread.join(timeout=5)


def http_request(port: int, method: str, path: str, headers: list[tuple[str, str]],
                 body: bytes, deadline_s: float = 30.0) -> tuple[int, str, list[tuple[str, str]],
                                                                  bytes]:
    """One raw HTTP/1.1 exchange on its own connection, headers exactly as given (a client
    library would fix the Host or refuse a lying Content-Length): status, reason, headers, body."""
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=deadline_s) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n" + body)
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            data += chunk
            if _complete(data):
                break
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[1].isdigit():
        return 0, "no response", [], data
    parsed = [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(":")
                                                             for line in lines[1:])]
    return int(status_line[1]), status_line[2] if len(status_line) > 2 else "", parsed, rest


def _complete(data: bytes) -> bool:
    top, found, rest = data.partition(b"\r\n\r\n")
    if not found:
        return False
    match = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", top)
    return match is not None and len(rest) >= int(match.group(1))


def observe_http(status: int, reason: str, headers: list[tuple[str, str]],
                 body: bytes) -> Observation:
    named = dict(headers)
    observed: Observation = {"status": status, "reason": reason,
                             "headers": {k: named[k] for k in OBSERVED_HEADERS if k in named}}
    length = named.get("content-length")
    observed["content_length_matches"] = length is not None and length == str(len(body))
    text = body.decode("utf-8", "replace")
    if "json" in named.get("content-type", "") and text.strip():
        observed["body"] = decode_message(text)
    else:
        observed["body_text"] = text
    return observed


class HttpServer:
    """One HTTP server process, its output in files (read once it has ended)."""

    def __init__(self, command: list[str], env: dict[str, str], world: World, name: str) -> None:
        self.out = world.root / f"{name}.stdout"
        self.err = world.root / f"{name}.stderr"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=err, env=env, cwd=world.root,
                                            start_new_session=True)

    def wait_ready(self, port: int, deadline_s: float = START_DEADLINE_S) -> bool:
        return wait_healthy(port, deadline_s, lambda: self.process.poll() is None)

    def wait_exit(self, deadline_s: float) -> int | None:
        try:
            return self.process.wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            self.stop()
            return None

    def stop(self) -> int | None:
        """SIGTERM its own process group, then SIGKILL after the deadline; the exit code of a
        server that stopped on SIGTERM, else None."""
        for signum, wait in ((signal.SIGTERM, EXIT_DEADLINE_S), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)
            try:
                code = self.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            return code if signum == signal.SIGTERM else None
        return None

    def stderr_lines(self) -> list[str]:
        return self.err.read_text(encoding="utf-8", errors="replace").splitlines()


def _matching(lines: list[str], pattern: str) -> list[str]:
    return [line for line in lines if re.search(pattern, line)]


#: a reference to an earlier answer of the same session: ``${ref:LABEL:PATH}``
REF = re.compile(r"\$\{ref:([\w-]+):([\w.-]*)\}")
#: what a reference stands for when its step or path is not there (on both sides alike)
MISSING_REF = "ref-missing"


def answer_at(answers: dict[str, Observation], label: str, path: str) -> Any:
    """The value at ``path`` (dotted keys and list indices) in the JSON of the first reply to
    the step whose id ends in ``.LABEL``: so a generated sequence reads back, updates or
    deletes the drawer *this* target filed, each side with its own ids."""
    seen = next((answer for step_id, answer in answers.items()
                 if step_id.endswith("." + label)), None)
    try:
        value: Any = seen["replies"][0]["result"]["content"][0]["json"]  # type: ignore[index]
        for part in filter(None, path.split(".")):
            value = value[int(part)] if isinstance(value, list) else value[part]
    except (KeyError, IndexError, TypeError, ValueError):
        return MISSING_REF
    return value


class SessionRun:
    """One session of the script against one target, in its own world."""

    def __init__(self, session: Session, target: Target, world: World) -> None:
        self.session = session
        self.target = target
        self.world = world.create()
        extra = dict(session.env)
        if session.token:  # the servers require it; steps send it unless told otherwise
            extra[TOKEN_ENV] = session.token
        self.env = target.environment(self.world, extra)
        self.stdio: dict[str, StdioServer] = {}
        self.http: HttpServer | None = None
        self.port = 0
        self.broken: str | None = None
        self.answers: dict[str, Observation] = {}  # step id -> what this target answered

    def _fill(self, value: Any) -> Any:
        """``${SOURCE}``, ``${PALACE}``, ``${HOME}`` and ``${PORT}`` in what a step sends; a
        string that is wholly ``${ref:LABEL:PATH}`` becomes what this target answered earlier
        in the session (see :func:`answer_at`)."""
        if isinstance(value, str) and (ref := REF.fullmatch(value)) is not None:
            return answer_at(self.answers, ref.group(1), ref.group(2))
        if isinstance(value, str):
            for name, path in (("SOURCE", self.world.source), ("PALACE", self.world.palace),
                               ("HOME", self.world.home)):
                value = value.replace("${" + name + "}", str(path))
            return value.replace("${PORT}", str(self.port))
        if isinstance(value, list):
            return [self._fill(item) for item in value]
        if isinstance(value, dict):
            return {key: self._fill(item) for key, item in value.items()}
        return value

    def _server(self, name: str) -> StdioServer:
        if name not in self.stdio:
            self.stdio[name] = StdioServer(self.target.stdio_command(), self.env, self.world.root)
        return self.stdio[name]

    def start(self) -> None:
        """Start the session's servers at once (a stdio server takes the writer lease only on
        its first lease-taking call, so starting every one early changes nothing but time)."""
        for step in self.session.steps:
            if step.action in ("send", "raw"):
                self._server(step.proc)
        if self.session.transport == "http":
            self.port = free_port()
            self.http = HttpServer(self.target.http_command(self.port, self.world), self.env,
                                   self.world, "http")
            if not self.http.wait_ready(self.port):
                self.broken = "the HTTP server never answered /healthz"

    def run_step(self, step: Step) -> Observation | None:
        if self.broken is not None:
            return {"skipped": self.broken}
        action = step.action
        spec = self._fill(step.spec)
        if action in ("send", "raw"):
            lines = spec if isinstance(spec, list) else [spec]
            payload = [(item if action == "raw" else json.dumps(item)).encode("utf-8") + b"\n"
                       for item in lines]
            seen = self._server(step.proc).exchange(payload, step.timeout_s)
            if step.id:
                self.answers[step.id] = seen
            if seen.get("timed_out") or seen.get("stdout_closed"):
                self.broken = f"the stdio server {step.proc} stopped answering at {step.id}"
            return seen
        if action in ("rpc", "http"):
            return self._http_step(action, spec, step.timeout_s)
        if action == "eof":
            server = self.stdio.pop(str(spec))
            code = server.close()
            return {"exit": code, "stderr": _matching(server.stderr, step.stderr_match)}
        if action == "term":
            server = self.stdio.pop(str(spec))
            code = server.terminate()
            return {"exit": code, "stderr": _matching(server.stderr, step.stderr_match)}
        if action == "http_stop":
            http, self.http = self.http, None
            assert http is not None  # script.py: only in http sessions
            code = http.stop()
            return {"exit": code, "stderr": _matching(http.stderr_lines(), step.stderr_match)}
        if action == "kill":
            self.stdio.pop(str(spec)).kill()
            return None
        if action == "cli":
            return self._cli(spec, step)
        if action == "http_start":
            return self._http_start(spec, step)
        raise ValueError(f"unknown step action {action!r}")  # script.py validates actions

    def _http_step(self, action: str, spec: Any, deadline_s: float) -> Observation:
        """``rpc``: POST /mcp as a well-behaved client; ``http``: any request, whose
        ``headers`` replace (or, given ``null``, remove) the defaults of the same name."""
        request = {"method": "POST", "path": "/mcp", "json": spec} if action == "rpc" else spec
        defaults: dict[str, str] = {"Host": f"127.0.0.1:{self.port}"}
        if "json" in request:
            defaults["Content-Type"] = "application/json"
            defaults["Accept"] = "application/json, text/event-stream"
        if self.session.token and request.get("auth", "good") == "good":
            defaults["Authorization"] = f"Bearer {self.session.token}"
        given: dict[str, str | None] = request.get("headers", {})
        merged = {**defaults, **given}
        body = (json.dumps(request["json"]).encode() if "json" in request
                else str(request.get("body", "")).encode())
        if "Content-Length" not in merged and (body or request["method"] in ("POST", "PUT")):
            merged["Content-Length"] = str(len(body))
        headers = [(name, value) for name, value in merged.items() if value is not None]
        try:
            answered = http_request(self.port, request["method"], request["path"], headers, body,
                                    deadline_s)
        except OSError as exc:
            return {"connect_failed": type(exc).__name__}
        return observe_http(*answered)

    def _cli(self, spec: Any, step: Step) -> Observation:
        try:
            done = subprocess.run(self.target.cli_command(*spec), env=self.env,
                                  cwd=self.world.root, capture_output=True, text=True,
                                  timeout=step.timeout_s, check=False, start_new_session=True)
        except subprocess.TimeoutExpired:
            return {"timed_out": True}
        return {"exit": done.returncode, "stdout_empty": not done.stdout.strip(),
                "stderr": _matching(done.stderr.splitlines(), step.stderr_match)}

    def _http_start(self, spec: Any, step: Step) -> Observation:
        port = free_port()
        env = {**self.env, **{k: str(v) for k, v in spec.get("env", {}).items()}}
        server = HttpServer(self.target.http_command(port, self.world), env, self.world,
                            f"http-start-{step.id}")
        code = server.wait_exit(step.timeout_s)
        return {"exit": code, "stderr": _matching(server.stderr_lines(), step.stderr_match)}

    def close(self) -> None:
        for server in self.stdio.values():
            server.kill()
        self.stdio.clear()
        if self.http is not None:
            self.http.stop()


def run_session(session: Session, target: Target, world: World,
                progress: Callable[[str], None] | None = None) -> dict[str, Observation]:
    """Every point of one session, in order; a session that breaks marks the rest skipped."""
    observed: dict[str, Observation] = {}
    run = SessionRun(session, target, world)
    try:
        run.start()
        for step in session.steps:
            seen = run.run_step(step)
            if step.id and seen is not None:
                observed[step.id] = {"section": step.section, **seen}
    finally:
        run.close()
    if progress is not None:
        progress(f"{target.name}: {session.id}: {len(observed)} points")
    return observed


def run_script(script: Script, target: Target, root: Path,
               progress: Callable[[str], None] | None = None, jobs: int = 2) -> dict[str, Any]:
    """The whole script against ``target``, ``jobs`` sessions at a time (each in its own
    world): its observations, in script order, and the worlds' placeholders."""
    worlds = {session.id: World(root / target.name / session.id) for session in script.sessions}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        observed = list(pool.map(lambda s: run_session(s, target, worlds[s.id], progress),
                                 script.sessions))
    points: dict[str, Observation] = {}
    for session, seen in zip(script.sessions, observed, strict=True):
        for point_id, observation in seen.items():
            points[point_id] = {**observation, "session": session.id}
    return {"target": target.name, "points": points,
            "worlds": {name: target.placeholders(world) for name, world in worlds.items()}}
