"""Drive real ``palace-fake-mcp`` processes over pipes, the way a stdio bridge would.

Each :class:`FakeProcess` gets its own HOME (the writer lease lives under ``$HOME/.mempalace``),
palace dir and journal inside the test's ``tmp_path``, so tests run in parallel without meeting.
Two threads drain stdout (into a queue of lines) and stderr (into a buffer); waits are bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from palace_conformance.fake.journal import read_journal

BIN = Path(sys.executable).parent
FAKE_MCP = BIN / "palace-fake-mcp"
PALACE_CONFORMANCE = BIN / "palace-conformance"
DATA = Path(__file__).parent / "data"
STDIN_EOF_LINE = "stdin EOF -- client disconnected, shutting down"
#: generous bound for "the answer comes at once"; only lower bounds are tight in these tests
PROMPT = 10.0


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The parent's environment without fake/mempalace settings, with HOME pointed at ``home``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_FAKE_", "MEMPALACE_", "MEMPAL_"))}
    env["HOME"] = str(home)
    env.update(extra)
    return env


def rpc(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def payload(response: dict[str, Any]) -> Any:
    """The JSON inside a tools/call result's single text block (asserting that shape)."""
    content = response["result"]["content"]
    assert len(content) == 1 and content[0]["type"] == "text", response
    return json.loads(content[0]["text"])


class FakeProcess:
    """One fake server process, with helpers to send lines and read replies."""

    def __init__(self, root: Path, *, name: str = "fake", faults: Sequence[str] = (),
                 plan: Path | None = None, journal: Path | None = None,
                 state: Path | None = None, home: Path | None = None,
                 palace: Path | None = None, args: Sequence[str] = (),
                 command: Sequence[str] | None = None, drain_stderr: bool = True,
                 env: dict[str, str] | None = None, palace_arg: bool = True) -> None:
        self.root = root
        self.home = home or root / "home"
        self.palace = palace or root / "palace"
        self.journal_path = journal or root / "journal.jsonl"
        if not self.home.exists():
            self.home.mkdir(parents=True)
        self.palace.mkdir(parents=True, exist_ok=True)
        extra = {"PALACE_FAKE_JOURNAL": str(self.journal_path)}
        if faults:
            extra["PALACE_FAKE_FAULT"] = ";".join(faults)
        if plan is not None:
            extra["PALACE_FAKE_PLAN"] = str(plan)
        # a test's fake starts initialised unless the test hands it a state (as the kit's
        # worlds do); only a fake started by hand reads its start state off the disk
        extra["PALACE_FAKE_STATE"] = str(state if state is not None
                                         else root / f"{name}-{uuid.uuid4().hex[:8]}.state.json")
        extra.update(env or {})
        palace_args = ["--palace", str(self.palace)] if palace_arg else []  # a server's flag
        argv = [*(command or [str(FAKE_MCP)]), *palace_args, *args]
        self.name = name
        self.lines: queue.Queue[tuple[float, bytes]] = queue.Queue()
        self.stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._ids = 1000
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if drain_stderr else subprocess.DEVNULL,
            env=clean_env(self.home, **extra), start_new_session=True,
        )
        self._threads = [threading.Thread(target=self._pump_stdout, daemon=True)]
        if drain_stderr:
            self._threads.append(threading.Thread(target=self._pump_stderr, daemon=True))
        for thread in self._threads:
            thread.start()

    # -- pumps ------------------------------------------------------------------------------

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put((time.monotonic(), line))

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := self.proc.stderr.read1(65536):
            with self._stderr_lock:
                self.stderr.extend(chunk)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_text(self) -> str:
        with self._stderr_lock:
            return self.stderr.decode("utf-8", "replace")

    def wait_stderr(self, text: str, timeout: float = PROMPT) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.stderr_text():
                return self.stderr_text()
            time.sleep(0.01)
        raise AssertionError(f"{self.name}: stderr never showed {text!r}: {self.stderr_text()!r}")

    # -- writing ----------------------------------------------------------------------------

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def send(self, message: Any, end: bytes = b"\n") -> None:
        """Write a message (dict/list: JSON with default separators; str/bytes: as is) + ``end``."""
        if isinstance(message, bytes):
            data = message
        elif isinstance(message, str):
            data = message.encode()
        else:
            data = json.dumps(message, ensure_ascii=False).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + end)
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    # -- reading ----------------------------------------------------------------------------

    def recv_line(self, timeout: float = PROMPT) -> bytes:
        try:
            return self.lines.get(timeout=timeout)[1]
        except queue.Empty:
            raise AssertionError(f"{self.name}: no stdout line within {timeout}s; "
                                 f"stderr: {self.stderr_text()[-2000:]!r}") from None

    def recv_timed(self, timeout: float = PROMPT) -> tuple[float, dict[str, Any]]:
        try:
            when, line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self.name}: no reply within {timeout}s; "
                                 f"stderr: {self.stderr_text()[-2000:]!r}") from None
        return when, json.loads(line)

    def recv(self, timeout: float = PROMPT) -> dict[str, Any]:
        return self.recv_timed(timeout)[1]

    def assert_silent(self, within: float = 0.3) -> None:
        try:
            _, line = self.lines.get(timeout=within)
        except queue.Empty:
            return
        raise AssertionError(f"{self.name}: expected no output, got {line[:300]!r}")

    def request(self, method: str, params: Any = None, request_id: Any = None,
                timeout: float = PROMPT) -> dict[str, Any]:
        request_id = self.next_id() if request_id is None else request_id
        self.send(rpc(method, params, request_id))
        reply = self.recv(timeout)
        assert reply.get("id") == request_id, reply
        return reply

    def call(self, tool: str, arguments: dict[str, Any] | None = None,
             timeout: float = PROMPT) -> dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": arguments or {}},
                            timeout=timeout)

    def ping(self, timeout: float = PROMPT) -> None:
        reply = self.request("ping", timeout=timeout)
        assert reply["result"] == {}, reply

    # -- process ----------------------------------------------------------------------------

    def wait(self, timeout: float = PROMPT) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} (pid {self.pid}) still running after {timeout}s; "
                                 f"stderr: {self.stderr_text()[-2000:]!r}") from None

    def finish(self, timeout: float = PROMPT) -> int:
        """:meth:`wait`, then the pumps read to the pipes' end, so the stdout and stderr the
        process wrote before it exited are all there (a pump can lag the exit under load).
        Not for a process whose grandchild holds the pipes: their end is the grandchild's."""
        deadline = time.monotonic() + timeout
        code = self.wait(timeout)
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise AssertionError(f"{self.name} (pid {self.pid}) exited {code} but its pipes "
                                     f"stayed open {timeout}s (a grandchild holds them?)")
        return code

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def journal(self) -> list[dict[str, Any]]:
        return read_journal(self.journal_path)

    def records(self, kind: str, **match: Any) -> list[dict[str, Any]]:
        return [r for r in self.journal()
                if r.get("kind") == kind and all(r.get(k) == v for k, v in match.items())]

    def sync(self) -> list[bytes]:
        """Ping with a fresh id and return every line that came before its reply: whatever an
        earlier exchange left in the pipe (a shared process checks this is nothing)."""
        sentinel = f"sync-{self.next_id()}"
        self.send(rpc("ping", None, sentinel))
        stray = []
        while True:
            line = self.recv_line()
            if json.loads(line).get("id") == sentinel:
                return stray
            stray.append(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for thread in self._threads:  # the pumps end at EOF, which the exit guarantees
            thread.join(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def __enter__(self) -> FakeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for(predicate: Any, timeout: float = PROMPT, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def run_cli(args: Iterable[str], home: Path, timeout: float = 30, **env: str
            ) -> subprocess.CompletedProcess[str]:
    """Run ``palace-conformance ARGS`` with a private HOME; capture text output."""
    return subprocess.run([str(PALACE_CONFORMANCE), *args], capture_output=True, text=True,
                          timeout=timeout, env=clean_env(home, **env))


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL a process started with ``start_new_session`` (and anything it spawned)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


# -- an independent statement of mempalace's reply rules, for property tests -------------------

SERVED = frozenset({"initialize", "ping", "tools/list", "tools/call"})


def expected_reply(line: bytes) -> tuple[str, Any, Any] | None:
    """What mempalace 3.11 owes one stdin line: None (silence), ``("error", code, id)`` for a
    protocol error, or ``("answer", id, None)`` for a served method (a result or any error)."""
    text = line.decode("utf-8", "replace").strip()
    if not text:
        return None
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return ("error", -32700, None)
    if not isinstance(message, dict):
        return ("error", -32600, None)
    method, request_id = message.get("method"), message.get("id")
    if isinstance(method, str) and method.startswith("notifications/"):
        return None
    if isinstance(method, str) and method in SERVED:
        return ("answer", request_id, None)
    if request_id is None:
        return None
    return ("error", -32601, request_id)


def check_reply(expected: tuple[str, Any, Any], reply: dict[str, Any]) -> None:
    """Assert ``reply`` is a well-formed JSON-RPC response matching ``expected``."""
    assert reply.get("jsonrpc") == "2.0", reply
    assert set(reply) in ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"}), reply
    if "error" in reply:
        error = reply["error"]
        assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str)
        assert set(error) <= {"code", "message", "data"}, error
    kind, first, second = expected
    if kind == "answer":
        assert reply["id"] == first, (expected, reply)
        if "error" in reply:
            assert reply["error"]["code"] != -32603, reply  # no dispatch crash
    else:
        assert "error" in reply and reply["error"]["code"] == first, (expected, reply)
        assert reply["id"] == second, (expected, reply)


# -- the brain in-process (no subprocess), for fast property tests -----------------------------


class RecordingPort:
    """A playback port that records instead of writing, and never actually waits."""

    def __init__(self) -> None:
        self.out: list[Any] = []
        self.paused: list[int | None] = []
        self.exit_code: int | None = None

    async def emit(self, message: dict[str, Any]) -> None:
        self.out.append(message)

    async def emit_raw(self, data: bytes) -> None:
        self.out.append(data)

    async def exit(self, code: int) -> None:
        self.exit_code = code

    async def pause(self, ms: int | None) -> None:
        self.paused.append(ms)

    async def offload(self, fn: Any, *args: Any) -> Any:
        return None  # stderr floods are not replayed in-process


def make_brain(root: Path, faults: Sequence[str] = (), state: Path | None = None,
               journal: Path | None = None) -> Any:
    """A stdio brain over an in-memory (or file) palace, with its own HOME-less lease dir."""
    from palace_conformance.fake.brain import Brain
    from palace_conformance.fake.faults import FaultPlan, parse_compact
    from palace_conformance.fake.journal import Journal
    from palace_conformance.fake.lease import Lease
    from palace_conformance.fake.palace import PalaceStore

    plan = FaultPlan([parse_compact(spec, index) for index, spec in enumerate(faults)])
    (root / "palace").mkdir(parents=True, exist_ok=True)
    return Brain(transport="stdio", plan=plan, journal=Journal(journal, "stdio"),
                 store=PalaceStore(state), lease=Lease(str(root / "palace"), str(root / "home")))


def drive(brain: Any, line: bytes | str) -> RecordingPort:
    """Feed one line to the brain and play the exchange onto a :class:`RecordingPort`."""
    from palace_conformance.fake.playback import play
    from palace_conformance.fake.stdio import run_to_end

    port = RecordingPort()
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = text.strip()
    if text:
        run_to_end(play(brain, brain.receive(text), port))
    return port


def call_in_process(brain: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    port = drive(brain, json.dumps(rpc("tools/call", {"name": tool, "arguments": arguments})))
    assert len(port.out) == 1, port.out
    return port.out[0]
