"""The runner's side of driver protocol v1 (DRIVER.md): spawn a host, one request at a time.

The runner never trusts the host to keep time: every request has a runner-side deadline (the op's
``timeout_ms`` plus a grace), and a host that misses it is killed and reported as a failure naming
the op. A run therefore always ends, whatever the bridge under test does. Anything on the host's
stdout that is not one JSON reply is a ``protocol_violation``; its stderr is kept for reports.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from palace_conformance import processes as procs
from palace_conformance.contract import (
    DRIVER_PROTOCOL,
    HOST_DEADLINE,
    HOST_EXITED,
    HOST_START,
    PROTOCOL_VERSION,
    PROTOCOL_VIOLATION,
)
from palace_conformance.errors import HostError
from palace_conformance.runner.execution import node_pool
from palace_conformance.runner.execution import warm_client as warm_start

DEFAULT_GRACE_MS = 3000  # runner-side slack past the host's own deadline
STDERR_KEEP = 256 * 1024  # bytes of host stderr kept in memory (the tail of its copy too)
STDERR_FILE_HEAD = 1024 * 1024  # bytes at the head of the stderr copy (``stderr_path``)
#: the longest stdout line the runner reads: far past any reply a scenario asks for, short of
#: what a host could take from the runner's memory (a line is held whole until it is parsed)
MAX_LINE_BYTES = 16 * 1024 * 1024
CLOSE_WAIT_S = 5.0  # how long close() waits for the host to die once its group is killed
PIPE_WAIT_S = 2.0  # how long close() waits for the host's pipes to reach EOF, per attempt


class DriverFailure(HostError):
    """The host cannot be driven any further (it is dead or has been killed); one line."""

    def __init__(self, kind: str, op: str, message: str) -> None:
        self.kind = kind
        self.op = op
        super().__init__(message)


@dataclass
class Reply:
    """One host reply. ``elapsed_ms`` is measured by the runner around the round trip."""

    id: int
    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None
    effects: list[dict[str, Any]] = field(default_factory=list)
    host_ms: float | None = None
    elapsed_ms: float = 0.0


_EOF = object()


@dataclass(frozen=True)
class _OverLong:
    """What the stdout pump queues for a line past :data:`MAX_LINE_BYTES`: its start only."""

    limit: int
    head: bytes

    def describe(self, op: str) -> str:
        return (f"host sent an over-long line (more than {self.limit} bytes without a newline) "
                f"on stdout during {op!r}: {self.head[:60]!r}...; killed it")


#: the line that names an error: ``Error: Cannot find module 'x'``, ``Error [ERR_...]: ...``,
#: ``TypeError: ...``, Python's ``ModuleNotFoundError: ...``
ERROR_LINE = re.compile(r"^\s*(?:Uncaught\s+)?(?:[A-Za-z_][\w.]*)?(?:Error|Exception)"
                        r"(?:\s*\[\w+\])?:\s")


def stderr_excerpt(text: str, lines: int = 3) -> str:
    """The last ``lines`` non-blank lines of a host's stderr, led by its last error line when
    the tail misses it: Node prints the error first, then its stack, a code object and its
    version, so the tail alone drops ``Cannot find module``."""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    tail = kept[-lines:]
    errors = [line for line in kept if ERROR_LINE.match(line)]
    if errors and errors[-1] not in tail:
        tail = [errors[-1], "...", *tail]
    return " | ".join(tail)


class DriverClient:
    """A running host process. Use as a context manager; :meth:`close` always cleans up."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None,
                 stderr_path: str | os.PathLike[str] | None = None,
                 grace_ms: int = DEFAULT_GRACE_MS, warm: bool = True) -> None:
        self.argv = list(argv)
        self.warm = warm  # the reference host may be forked warm (warm_client)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.grace_ms = grace_ms
        self.stderr_path = Path(stderr_path) if stderr_path else None
        self.proc: subprocess.Popen[bytes] | warm_start.WarmProcess | None = None
        self._lines: queue.Queue[Any] = queue.Queue()
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._pipe_inodes: list[int] = []
        self._next_id = 1
        self.dead: DriverFailure | None = None
        #: inherited by everything the host starts, so close() finds what detached (processes)
        self.mark = procs.new_host_mark()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> DriverClient:
        try:
            env = {**(self.env if self.env is not None else os.environ),
                   procs.HOST_MARK: self.mark}
            cwd = self.cwd or os.getcwd()
            pooled = node_pool.take(self.argv, env, cwd) if self.warm else None
            if pooled is not None:  # a Node host started ahead, now in this run's env and cwd
                self.proc, self.mark = pooled.proc, pooled.mark
            else:
                self.proc = warm_start.start(self.argv, warm=self.warm, env=env, cwd=cwd,
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE)
        except OSError as exc:
            raise DriverFailure(HOST_START, "start", f"cannot start host {self.argv[0]!r}: "
                                f"{exc.strerror or exc}") from None
        self._pipe_inodes = [procs.pipe_inode(stream.fileno())
                             for stream in (self.proc.stdout, self.proc.stderr)
                             if stream is not None]
        for target in (self._pump_stdout, self._pump_stderr):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __enter__(self) -> DriverClient:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _pump_stdout(self) -> None:
        """Queue each stdout line; a line past :data:`MAX_LINE_BYTES` is queued as
        :class:`_OverLong` and the rest of the stream is read and dropped (the host is killed
        for it), so memory stays bounded whatever the host writes."""
        assert self.proc is not None and self.proc.stdout is not None
        stream = cast(io.BufferedReader, self.proc.stdout)  # Popen's pipes are buffered
        limit = MAX_LINE_BYTES
        while line := stream.readline(limit + 1):
            if len(line) > limit and not line.endswith(b"\n"):
                self._lines.put(_OverLong(limit, line[:120]))
                del line
                while stream.read1(65536):
                    pass
                break
            self._lines.put(line)
        self._lines.put(_EOF)

    def _pump_stderr(self) -> None:
        """Keep the last :data:`STDERR_KEEP` bytes in memory; copy the stream to
        ``stderr_path`` up to :data:`STDERR_FILE_HEAD` bytes, then, at its end, the kept tail
        after a line that says how many bytes between the two were dropped."""
        assert self.proc is not None and self.proc.stderr is not None
        sink = open(self.stderr_path, "ab") if self.stderr_path else None  # noqa: SIM115
        head_room, total, copied = STDERR_FILE_HEAD, 0, 0
        try:
            stream = cast(io.BufferedReader, self.proc.stderr)  # Popen's pipes are buffered
            for chunk in iter(lambda: stream.read1(65536), b""):
                total += len(chunk)
                with self._stderr_lock:
                    self._stderr.extend(chunk)
                    if len(self._stderr) > STDERR_KEEP:
                        del self._stderr[: len(self._stderr) - STDERR_KEEP]
                if sink is not None and copied < head_room:
                    sink.write(chunk[:head_room - copied])
                    sink.flush()
                    copied += min(len(chunk), head_room - copied)
        finally:
            if sink is not None:
                with self._stderr_lock:
                    tail = bytes(self._stderr[len(self._stderr) - min(total - copied,
                                                                      len(self._stderr)):])
                dropped = total - copied - len(tail)
                if dropped:
                    sink.write(f"\n[palace-conformance: {dropped} bytes of the host's stderr "
                               f"dropped here; the first {copied} and the last {len(tail)} are "
                               "kept]\n".encode())
                sink.write(tail)
                sink.close()

    def stderr_text(self) -> str:
        with self._stderr_lock:
            return self._stderr.decode("utf-8", "replace")

    def stderr_tail(self, lines: int = 3) -> str:
        """The excerpt a reason quotes, secrets out first (the console's one redactor): a reason
        is cut to fit a line, and a cut secret no longer matches."""
        from palace_conformance.redaction import CONSOLE

        return stderr_excerpt(CONSOLE.text(self.stderr_text()), lines)

    def close(self, grace_s: float = 2.0) -> int | None:
        """Close stdin, wait ``grace_s``, then kill the host's whole process group; every wait
        has a deadline (in all at most ``grace_s`` + :data:`CLOSE_WAIT_S` + 1.25 x
        :data:`PIPE_WAIT_S`).

        A process the host started that left the group (a daemon that called ``setsid``) is
        found by the host's mark in its environment and killed too; one that still holds the
        host's stdout or stderr without the mark (it cleared its environment) is found by the
        pipe it holds; a pipe still held after that is abandoned, never waited on."""
        proc = self.proc
        if proc is None:
            return None
        if proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace_s)
        self._kill_group()
        procs.kill_marked(self.mark)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(CLOSE_WAIT_S)
        if not self._join_pumps(PIPE_WAIT_S / 4):
            for pid in procs.pipe_holders(self._pipe_inodes):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            self._join_pumps(PIPE_WAIT_S)
        for thread, stream in zip(self._threads, (proc.stdout, proc.stderr), strict=False):
            # closing a pipe a pump still reads would wait for that read: leave it to the pump,
            # which ends (and its daemon thread with it) when the last holder lets go
            if stream is not None and not thread.is_alive():
                with contextlib.suppress(OSError):
                    stream.close()
        return proc.returncode

    def _join_pumps(self, seconds: float) -> bool:
        """Wait up to ``seconds`` in all for both pumps to reach EOF; True when both did."""
        deadline = time.monotonic() + seconds
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def _kill_group(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def _die(self, kind: str, op: str, message: str) -> DriverFailure:
        """Kill the host and remember why; every later request fails with the same reason."""
        if self.proc is not None:
            self._kill_group()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        self.dead = DriverFailure(kind, op, message)
        return self.dead

    # -- requests ------------------------------------------------------------------------------

    def request(self, op: str, fields: Mapping[str, Any] | None = None, *,
                deadline_ms: float) -> Reply:
        """Send one request and wait for its reply; :class:`DriverFailure` if none can come.

        ``deadline_ms`` is the host's own budget for the op; the runner waits that plus its grace.
        """
        if self.dead is not None:
            raise self.dead
        assert self.proc is not None and self.proc.stdin is not None, "start() first"
        stray = self._drain_stray()
        if stray is not None:
            raise self._die(PROTOCOL_VIOLATION, op, f"host wrote {stray!r} to stdout between "
                            "replies (stdout carries only protocol)")
        request_id = self._next_id
        self._next_id += 1
        payload = {"id": request_id, "op": op, **(fields or {})}
        if op == "load" and isinstance(payload.get("env"), Mapping):
            # a host hands its bridge this environment, not its own: the mark goes along
            payload["env"] = {**payload["env"], procs.HOST_MARK: self.mark}
        line = json.dumps(payload, ensure_ascii=False).encode() + b"\n"
        started = time.monotonic()
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._exited(op) from None
        limit = started + (deadline_ms + self.grace_ms) / 1000.0
        while True:
            remaining = limit - time.monotonic()
            try:
                raw = self._lines.get(timeout=max(remaining, 0))
            except queue.Empty:
                raise self._die(HOST_DEADLINE, op, f"host did not answer {op!r} within "
                                f"{deadline_ms + self.grace_ms:.0f} ms (its deadline "
                                f"{deadline_ms:.0f} ms + {self.grace_ms} ms grace); killed "
                                "it") from None
            if raw is _EOF:
                raise self._exited(op)
            if isinstance(raw, _OverLong):
                raise self._die(PROTOCOL_VIOLATION, op, raw.describe(op))
            if not raw.strip():
                continue
            reply = self._parse(raw, op, request_id)
            reply.elapsed_ms = (time.monotonic() - started) * 1000.0
            return reply

    def wait_ended(self, op: str, deadline_ms: float) -> float:
        """After ``exit``: wait up to ``deadline_ms`` for the host's process to end; the ms it
        took. The host cannot be driven any more either way (every later request fails, and the
        runner sends no teardown ``exit``); a host still running at the deadline is killed and
        :class:`DriverFailure` names it."""
        assert self.proc is not None
        started = time.monotonic()
        try:
            code = self.proc.wait(deadline_ms / 1000.0)
        except subprocess.TimeoutExpired:
            raise self._die(HOST_DEADLINE, op, f"host still running {deadline_ms:.0f} ms after "
                            f"it answered {op!r}; killed it") from None
        self.dead = DriverFailure(HOST_EXITED, op, f"host exited after {op!r} (exit code {code})")
        return (time.monotonic() - started) * 1000.0

    def _drain_stray(self) -> str | None:
        while True:
            try:
                raw = self._lines.get_nowait()
            except queue.Empty:
                return None
            if raw is _EOF:
                self._lines.put(_EOF)
                return None
            if isinstance(raw, _OverLong):
                return f"an over-long line (more than {raw.limit} bytes): {raw.head[:60]!r}..."
            if raw.strip():
                line: str = raw.decode("utf-8", "replace").strip()[:120]
                return line

    def _exited(self, op: str) -> DriverFailure:
        assert self.proc is not None
        try:
            code = self.proc.wait(2)
        except subprocess.TimeoutExpired:
            code = None
        for thread in self._threads[1:]:
            thread.join(1)
        tail = self.stderr_tail()
        status = f"exit code {code}" if code is not None else "stdout closed"
        return self._die(HOST_EXITED, op, f"host exited during {op!r} ({status})"
                         + (f": {tail}" if tail else ""))

    def _parse(self, raw: bytes, op: str, request_id: int) -> Reply:
        text = raw.decode("utf-8", "replace").strip()
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise self._die(PROTOCOL_VIOLATION, op, f"host wrote non-JSON to stdout during "
                            f"{op!r}: {text[:120]!r}") from None
        if not isinstance(data, dict):
            raise self._die(PROTOCOL_VIOLATION, op, f"host reply to {op!r} is not a JSON "
                            f"object: {text[:120]!r}")
        if data.get("id") != request_id:
            raise self._die(PROTOCOL_VIOLATION, op, f"host reply to {op!r} has id "
                            f"{data.get('id')!r}, expected {request_id}")
        ok = data.get("ok")
        if not isinstance(ok, bool):
            raise self._die(PROTOCOL_VIOLATION, op, f"host reply to {op!r} has no boolean 'ok'")
        error = data.get("error")
        if not ok and not isinstance(error, dict):
            error = {"kind": "bad_request", "message": "host said ok: false without an error"}
        effects = data.get("effects") or []
        if not isinstance(effects, list) or not all(isinstance(e, dict) for e in effects):
            raise self._die(PROTOCOL_VIOLATION, op, f"host reply to {op!r}: 'effects' must be "
                            "a list of objects")
        host_ms = data.get("ms")
        return Reply(id=request_id, ok=ok, result=data.get("result"),
                     error=error if not ok else None, effects=effects,
                     host_ms=float(host_ms) if isinstance(host_ms, int | float) else None)

    def hello(self, deadline_ms: float = 10000) -> dict[str, Any]:
        """``hello``, checked: a host of another protocol major version is refused in one line."""
        reply = self.request("hello", deadline_ms=deadline_ms)
        if not reply.ok or not isinstance(reply.result, dict):
            raise self._die(PROTOCOL_VIOLATION, "hello", "host refused hello: "
                            f"{(reply.error or {}).get('message', 'no result')}")
        version = reply.result.get("protocol")
        if major(version) != DRIVER_PROTOCOL:
            raise self._die(PROTOCOL_VERSION, "hello", f"host speaks driver protocol {version}; "
                            f"this palace-conformance speaks {DRIVER_PROTOCOL}")
        return reply.result


def major(version: Any) -> int | None:
    """The major number of a protocol version (``1``, ``"1"``, ``"1.2"``), or None."""
    if isinstance(version, bool):
        return None
    if isinstance(version, int):
        return version
    try:
        return int(str(version).split(".", 1)[0])
    except ValueError:
        return None
