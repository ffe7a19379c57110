"""Start the runner's own Python processes (the reference host, the HTTP fake) from a warm fork.

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

import atexit
import contextlib
import importlib
import io
import json
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from ..hosts import REFERENCE_HOST
from . import procs

#: the runner starts its own CLI as ``python -c LAUNCH ARGS...`` (the HTTP fake, the lock holder)
LAUNCH = "from palace_conformance.cli import main; main()"
#: imported once by the warm server, so no warm child pays for them
PRELOAD = ("palace_conformance.hosts.reference", "palace_conformance.cli",
           "palace_conformance.fake.http", "palace_conformance.fake.cli", "palace_bridge.http",
           "palace_bridge.remote", "httpx", "jsonschema")
SERVE = "from palace_conformance.runner.warm import serve; serve()"
READY_S = 30.0  # how long the warm server may take to import everything
#: what a stream argument may be: subprocess.PIPE, subprocess.DEVNULL, an open file or an fd
Stream = int | IO[Any] | None
_HEADER = struct.Struct("!I")
UNKNOWN_EXIT = 255  # the exit code of a child whose warm server died before reporting it


class WarmStartUnavailable(Exception):
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
    if argv[:len(REFERENCE_HOST)] == list(REFERENCE_HOST):
        return Entry(REFERENCE_HOST[2], None, tuple(argv[len(REFERENCE_HOST):]))
    if argv[:3] == [sys.executable, "-c", LAUNCH]:
        return Entry("palace_conformance.cli", "-c", tuple(argv[3:]))
    return None


# -- the runner's side -------------------------------------------------------------------------


class WarmProcess:
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

    def _read_status(self, timeout: float | None) -> int | None:
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

    def poll(self) -> int | None:
        return self._read_status(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._read_status(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

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
                    [sys.executable, "-c", SERVE, str(theirs.fileno())],
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
                socket.send_fds(sock, [_HEADER.pack(len(body)) + body], list(fds))
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


# -- the warm server ---------------------------------------------------------------------------


def serve() -> None:
    """The warm server's main loop: import everything, then fork a child per request, reap
    children and report each exit code on its status pipe. Single-threaded, so forking is safe.
    Exits when the runner closes its end (the runner is gone)."""
    sock = socket.socket(fileno=int(sys.argv[1]))
    for module in PRELOAD:
        importlib.import_module(module)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle
    statuses: dict[int, int] = {}  # child pid -> its status pipe
    buffer = b""
    pending: list[int] = []  # descriptors that came with the request being read
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    sock.sendall(b"ready\n")
    while True:
        for key, _ in selector.select():
            if key.fileobj == wake_read:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 512)
                continue
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
            if not data:
                return
            buffer += data
            pending += fds
            while len(buffer) >= _HEADER.size and len(pending) >= 4:
                (size,) = _HEADER.unpack_from(buffer)
                if len(buffer) < _HEADER.size + size:
                    break
                request = json.loads(buffer[_HEADER.size:_HEADER.size + size])
                buffer = buffer[_HEADER.size + size:]
                stdin, stdout, stderr, status = pending[:4]
                del pending[:4]
                try:
                    pid = _fork(request, (stdin, stdout, stderr))
                except OSError as exc:  # e.g. EAGAIN: too many processes; the runner goes cold
                    os.close(status)
                    sock.sendall(f"error cannot fork: {exc.strerror or exc}\n".encode())
                    continue
                statuses[pid] = status
                sock.sendall(f"pid {pid}\n".encode())
        _reap(statuses)


def _reap(statuses: dict[int, int]) -> None:
    while statuses:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = statuses.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, f"{os.waitstatus_to_exitcode(status)}\n".encode())
            os.close(fd)


def _fork(request: dict[str, Any], streams: tuple[int, int, int]) -> int:
    try:
        pid = os.fork()
    except OSError:
        _close_all(streams)
        raise
    if pid:
        _close_all(streams)  # the server keeps none of the child's streams
        return pid
    code = 1
    try:  # the child: nothing of the server's survives but the imported modules
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        for source, target in zip(streams, (0, 1, 2), strict=True):
            os.dup2(source, target)
        os.closerange(3, _max_fd())
        code = _run_child(request)
    finally:
        os._exit(code)


def _close_all(fds: Sequence[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (ValueError, OSError):
        return 4096


def _run_child(request: dict[str, Any]) -> int:
    """Become the process the argv would have started, run it, and end as Python would."""
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True,
                                  errors="backslashreplace")
    code = 0
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        module = importlib.import_module(request["module"])
        sys.argv = [request["argv0"] or str(module.__file__), *request["args"]]
        module.main()
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    for thread in threading.enumerate():  # the interpreter waits for non-daemon threads
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # os._exit skips them; a fresh interpreter would run them
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _exit_code(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def prestart() -> bool:
    """Start the warm server now (e.g. while the runner loads the catalogue); True if it runs."""
    try:
        with _SERVER._lock:
            _SERVER._ensure()
    except WarmStartUnavailable:
        return False
    return True
