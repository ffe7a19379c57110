"""Start the runner's own Python processes (the reference host, the HTTP fake) from a warm fork:
the runner's side (the server's side is :mod:`.warm_server`).

A fresh interpreter spends 0.2-0.5 s of CPU importing the bridge, httpx, jsonschema or the fake
before it can answer, and a catalogue run starts about 300 of them: on a 2-core machine that alone
is most of a minute. Instead, one *warm server* per runner process imports all of that once, and
forks a child for each start (Android's zygote, multiprocessing's forkserver): about 20 ms.

A warm child is still a process of its own, as a scenario sees it: a new session and process group
(the runner kills the group), its own argv, environment, working directory and standard streams,
no other inherited descriptors, its own exit code (negative for a signal, like
:class:`subprocess.Popen`), and its atexit handlers run when it ends. Only the runner's own
programs start this way (:func:`entry_for`); any other command, a Node host or a user's host,
starts cold, and ``palace-conformance run --cold-start`` turns it off.

Why not multiprocessing's forkserver: it re-imports the parent's ``__main__`` in every child, which
breaks scripts that embed the runner without a main guard.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from palace_conformance import processes as procs
from palace_conformance.errors import ConformanceError
from palace_conformance.forked_child import ForkedProcess
from palace_conformance.hosts import REFERENCE_HOST, SAFE_PATH
from palace_conformance.runner.execution.warm_server import REQUEST_HEADER

#: the runner starts its own CLI as ``python -c LAUNCH ARGS...`` (the HTTP fake, the lock holder)
LAUNCH = "from palace_conformance.cli import main; main()"
#: ... as this argv, ARGS after it
LAUNCH_ARGV: tuple[str, ...] = (sys.executable, SAFE_PATH, "-c", LAUNCH)
#: the runner's own Python programs started as ``python -P -m MODULE``: the reference host and
#: the selftest's host (the reference host with a mutant of the bridge applied)
WARM_MODULES: tuple[str, ...] = (REFERENCE_HOST[-1], "palace_conformance.selftest.host")
SERVE = "from palace_conformance.runner.execution.warm_server import serve; serve()"
READY_S = 30.0  # how long the warm server may take to import everything
#: what a stream argument may be: subprocess.PIPE, subprocess.DEVNULL, an open file or an fd
Stream = int | IO[Any] | None
UNKNOWN_EXIT = 255  # the exit code of a child whose warm server died before reporting it


class WarmStartUnavailable(ConformanceError):
    """The warm server cannot be used here; the caller starts the process cold instead."""


@dataclass(frozen=True)
class Entry:
    """What a recognised argv runs: ``module.main()``, with ``sys.argv`` as Python would set it
    (``argv0`` None: the module's file, as for ``python -m``)."""

    module: str
    argv0: str | None
    args: tuple[str, ...]


def entry_for(argv: Sequence[str]) -> Entry | None:
    """The warm entry for an argv the runner knows (its own Python programs), else None."""
    argv = list(argv)
    for module in WARM_MODULES:
        host = [*REFERENCE_HOST[:-1], module]
        if argv[:len(host)] == host:
            return Entry(module, None, tuple(argv[len(host):]))
    if argv[:len(LAUNCH_ARGV)] == list(LAUNCH_ARGV):
        return Entry("palace_conformance.cli", "-c", tuple(argv[len(LAUNCH_ARGV):]))
    return None


# -- the runner's side -------------------------------------------------------------------------


class WarmProcess(ForkedProcess):
    """The part of :class:`subprocess.Popen` the runner uses, for a child of the warm server.

    The server writes the child's exit code to ``status`` (a pipe) when it reaps it."""

    def __init__(self, pid: int, args: list[str], status: int, stdin: IO[bytes] | None,
                 stdout: IO[bytes] | None, stderr: IO[bytes] | None) -> None:
        self.pid = pid
        self.args = args
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._status = status
        self._orphaned = False
        self._lock = threading.Lock()

    def _exit_status(self, timeout: float | None) -> int | None:
        if self.returncode is None and not self._orphaned:
            poller = select.poll()  # not select(): no limit on the descriptor's number
            poller.register(self._status, select.POLLIN)
            if not poller.poll(None if timeout is None else max(0, int(timeout * 1000))):
                return None
            with self._lock:  # another thread may have read it meanwhile
                if self.returncode is None and not self._orphaned:
                    data = os.read(self._status, 64)
                    try:
                        self.returncode = int(data.decode().strip())
                    except ValueError:  # the server died first: nobody will report this child
                        self._orphaned = True
        if self.returncode is None:  # orphaned: watch the pid itself
            deadline = None if timeout is None else time.monotonic() + timeout
            while procs.alive(self.pid):
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                time.sleep(0.02)
            self.returncode = UNKNOWN_EXIT
        return self.returncode


    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._status)


class WarmServer:
    """The runner's connection to its warm server; starts it on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._broken: str | None = None

    def _ensure(self) -> socket.socket:
        if self._broken is not None:
            raise WarmStartUnavailable(self._broken)
        if self._sock is not None and self._proc is not None and self._proc.poll() is None:
            return self._sock
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with tempfile.TemporaryFile() as log:  # the server's stderr, read only if it fails
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, SAFE_PATH, "-c", SERVE, str(theirs.fileno())],
                    pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=log)
            except OSError as exc:
                mine.close()
                raise self._fail(f"cannot start the warm server: {exc}") from None
            finally:
                theirs.close()
            mine.settimeout(READY_S)
            try:
                ready = _recv_line(mine)
            except OSError:
                ready = b""
            if ready != b"ready":
                log.seek(0)
                tail = log.read().decode(errors="replace").strip().splitlines()[-1:]
                mine.close()
                with contextlib.suppress(OSError):
                    self._proc.kill()
                raise self._fail("the warm server did not start: "
                                 + (tail[0] if tail else "no output"))
        self._sock = mine
        return mine

    def close(self) -> None:
        """Stop the server (its children live on; it also exits when the runner does)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(5)

    def _fail(self, why: str) -> WarmStartUnavailable:
        self._broken = why
        return WarmStartUnavailable(why)

    def spawn(self, entry: Entry, fds: Sequence[int], env: Mapping[str, str], cwd: str) -> int:
        """Fork a child running ``entry`` on these descriptors (stdin, stdout, stderr, status).

        A server that died is started again; one that does not answer is given up on."""
        if len(fds) != 4:
            raise ValueError(f"spawn needs 4 descriptors (stdin, stdout, stderr, status), "
                             f"got {len(fds)}")
        body = json.dumps({"module": entry.module, "argv0": entry.argv0,
                           "args": list(entry.args), "env": dict(env), "cwd": cwd}).encode()
        with self._lock:
            sock = self._ensure()
            try:
                sock.settimeout(READY_S)
                socket.send_fds(sock, [REQUEST_HEADER.pack(len(body)) + body], list(fds))
                answer = _recv_line(sock)
            except OSError as exc:
                sock.close()
                self._sock = None
                if isinstance(exc, TimeoutError):
                    raise self._fail("the warm server stopped answering") from None
                raise WarmStartUnavailable(f"the warm server went away: {exc}") from None
        if not answer.startswith(b"pid "):
            why = answer.decode(errors="replace")
            raise WarmStartUnavailable(f"the warm server refused: {why}")
        return int(answer.split()[1])


def _recv_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(256)
        if not chunk:
            raise OSError("connection closed")
        data += chunk
    return data.strip()


_SERVER = WarmServer()  # one per runner process, like a connection pool; started on first use


def _ends(spec: Stream, for_child_read: bool) -> tuple[int, IO[bytes] | None, list[int]]:
    """(fd for the child, the runner's file for PIPE, fds to close in the runner after start)."""
    if spec == subprocess.PIPE:
        read, write = os.pipe()
        if for_child_read:
            return read, open(write, "wb"), [read]  # owned by the WarmProcess
        return write, open(read, "rb"), [write]
    if spec is None or spec == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDONLY if for_child_read else os.O_WRONLY)
        return fd, None, [fd]
    if isinstance(spec, int):
        return spec, None, []
    return spec.fileno(), None, []


def popen(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | os.PathLike[str],
          stdin: Stream = None, stdout: Stream = None, stderr: Stream = None,
          server: WarmServer | None = None) -> WarmProcess:
    """Start ``argv`` warm; :class:`WarmStartUnavailable` when it is not one of the runner's own
    programs or the warm server cannot run (the caller then uses :class:`subprocess.Popen`)."""
    entry = entry_for(argv)
    if entry is None:
        raise WarmStartUnavailable(f"{argv[0]!r} is not one of the runner's own programs")
    opened: list[int] = []
    files: list[IO[bytes] | None] = []
    child_fds: list[int] = []
    status_read, status_write = os.pipe()
    opened.append(status_write)
    try:
        for spec, reads in ((stdin, True), (stdout, False), (stderr, False)):
            fd, mine, close_after = _ends(spec, reads)
            child_fds.append(fd)
            files.append(mine)
            opened.extend(close_after)
        pid = (server or _SERVER).spawn(entry, [*child_fds, status_write], env, os.fspath(cwd))
    except BaseException:
        for handle in files:
            if handle is not None:
                handle.close()
        os.close(status_read)
        raise
    finally:
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)
    return WarmProcess(pid, list(argv), status_read, files[0], files[1], files[2])


def start(argv: Sequence[str], *, warm: bool, env: Mapping[str, str],
          cwd: str | os.PathLike[str], stdin: Stream = None, stdout: Stream = None,
          stderr: Stream = None,
          server: WarmServer | None = None) -> subprocess.Popen[bytes] | WarmProcess:
    """Warm when asked and possible, otherwise a plain ``Popen`` in a new session."""
    if warm and entry_for(argv) is not None:
        with contextlib.suppress(WarmStartUnavailable):
            return popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                         server=server)
    return subprocess.Popen(list(argv), stdin=stdin, stdout=stdout, stderr=stderr, env=dict(env),
                            cwd=cwd, start_new_session=True)


def prestart() -> bool:
    """Start the warm server now (e.g. while the runner loads the catalogue); True if it runs."""
    try:
        with _SERVER._lock:
            _SERVER._ensure()
    except WarmStartUnavailable:
        return False
    return True
