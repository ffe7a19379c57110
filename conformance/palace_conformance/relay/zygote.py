"""A pre-started, pre-imported real server (``run --server real``): a *zygote* in the real
mempalace's Python that imports the server's heavy dependencies once (chromadb, numpy, pydantic,
httpx: 3-5 s of a real server's cold start on a loaded machine) and forks a real server for
each spawn a fault relay asks it for, so a bridge's spawn of its palace costs about what a
spawn of the fake does.

Server side (:func:`serve`, run with the real Python; standard library only, as are this whole
module and :mod:`palace_conformance.forked_child`): a listening Unix socket; each connection is one
spawn. The relay sends a length-prefixed JSON request (the entry, argv, environment, working
directory) with the child's stdin, stdout and stderr as descriptors; the zygote forks, answers
``pid N``, and writes ``exit CODE`` on the connection when it reaps the child. The connection is
the child's lifeline: when the relay goes (a bridge that SIGKILLs its child, or its group), the
zygote SIGKILLs the real server, as ``PR_SET_PDEATHSIG`` did for a relay's own child. Mempalace
itself is imported in the child, after its environment is set: ``mempalace.mcp_server`` reads its
configuration (HOME, the palace path) at import.

Client side (:func:`spawn`): the relay's stand-in for :class:`subprocess.Popen`
(:class:`ZygoteProcess`), or None when there is no zygote (the relay then starts the server
cold, as before).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any

from palace_conformance.forked_child import ForkedProcess, ended_children, run_as_main

#: what the zygote imports before it serves: the real server's third-party dependencies (not
#: mempalace, whose modules read the environment at import)
PRELOAD = ("numpy", "pydantic", "httpx", "chromadb", "chromadb.api.client")
HEADER = struct.Struct("!I")
PR_SET_PDEATHSIG = 1
#: the relay's configuration key naming the zygote's socket
CONFIG_KEY = "zygote"


# -- the zygote (the real Python) ---------------------------------------------------------------

def serve(path: str) -> None:
    """Import, listen on ``path``, print ``ready``, then fork a child per connection until
    stdin closes (the runner is gone). Single-threaded, so forking is safe."""
    for module in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "wake")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "runner")
    children: dict[int, socket.socket] = {}  # pid -> its relay's connection
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "runner":
                if not os.read(sys.stdin.fileno(), 512):
                    for pid in children:
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                    return
            elif key.data == "wake":
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 512)
            elif key.data == "accept":
                _accept(listener, selector, children)
            else:  # a relay's connection: EOF (or anything) means it is gone
                _relay_gone(key.fileobj, selector, children)  # type: ignore[arg-type]
        _reap(children, selector)


def _accept(listener: socket.socket, selector: selectors.BaseSelector,
            children: dict[int, socket.socket]) -> None:
    conn, _ = listener.accept()
    conn.settimeout(30.0)
    try:
        request, fds = _read_request(conn)
        pid = _fork(request, fds)
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError):
            conn.sendall(f"error {exc}\n".encode())
        conn.close()
        return
    conn.sendall(f"pid {pid}\n".encode())
    children[pid] = conn
    selector.register(conn, selectors.EVENT_READ, pid)


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack_from(data)[0]:
        more = conn.recv(1 << 20)
        if not more:
            break
        data += more
    if len(fds) != 3 or len(data) < HEADER.size:
        for fd in fds:
            os.close(fd)
        raise ValueError("a spawn needs a request and 3 descriptors")
    (size,) = HEADER.unpack_from(data)
    return json.loads(data[HEADER.size:HEADER.size + size]), fds


def _relay_gone(conn: socket.socket, selector: selectors.BaseSelector,
                children: dict[int, socket.socket]) -> None:
    selector.unregister(conn)
    for pid, held in children.items():
        if held is conn:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _reap(children: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    for pid, code in ended_children(children):
        conn = children.pop(pid, None)
        if conn is None:
            continue
        with contextlib.suppress(OSError, KeyError, ValueError):
            selector.unregister(conn)
        with contextlib.suppress(OSError):
            conn.sendall(f"exit {code}\n".encode())
        conn.close()


def _fork(request: dict[str, Any], fds: list[int]) -> int:
    zygote = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        for fd in fds:
            os.close(fd)
        raise
    if pid:
        for fd in fds:
            os.close(fd)
        return pid
    code = 1
    try:  # the child: its own session, its streams, nothing else of the zygote's
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        os.setsid()
        _die_with(zygote)
        for source, target in zip(fds, (0, 1, 2), strict=True):
            os.dup2(source, target)
        os.closerange(3, 65536)
        code = _run(request)
    finally:
        os._exit(code)


def _die_with(zygote: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote:
        os._exit(128 + signal.SIGKILL)


def _run(request: dict[str, Any]) -> int:
    """Become the real server the argv would have started; end as Python would."""

    def main() -> Any:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        if request.get("function"):
            return getattr(importlib.import_module(request["module"]), request["function"])()
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        return None

    return run_as_main(main)


# -- the relay's side (the kit's Python) --------------------------------------------------------

def entry_for(command: Sequence[str]) -> dict[str, Any] | None:
    """What the zygote runs for the real server's command: the ``mempalace-mcp`` entry point
    (``mempalace.mcp_proxy:main``) or ``python -m mempalace.mcp_server ...``; None otherwise."""
    command = [str(part) for part in command]
    if len(command) >= 1 and os.path.basename(command[0]) == "mempalace-mcp":
        return {"module": "mempalace.mcp_proxy", "function": "main",
                "argv": [command[0], *command[1:]]}
    if len(command) >= 3 and command[1] == "-m":
        return {"module": command[2], "function": None, "argv": [command[2], *command[3:]]}
    return None


class ZygoteProcess(ForkedProcess):
    """The part of :class:`subprocess.Popen` the relays use, for a real server the zygote
    forked: its exit code comes on the spawn's connection."""

    args = "mempalace"

    def __init__(self, pid: int, conn: socket.socket, stdin: IO[bytes] | None,
                 stdout: IO[bytes] | None) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        #: the server's stderr held back in a pipe (:func:`spawn_early`), or None: the relay's
        self.stderr: IO[bytes] | None = None
        self.returncode: int | None = None
        self._conn = conn
        self._buffer = b""
        self._lock = threading.Lock()

    def _exit_status(self, timeout: float | None) -> int | None:
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            self._conn.settimeout(timeout)
            try:
                while not self._buffer.endswith(b"\n"):
                    chunk = self._conn.recv(64)
                    if not chunk:  # the zygote is gone, and its children with it
                        self.returncode = 128 + signal.SIGKILL
                        return self.returncode
                    self._buffer += chunk
            except (TimeoutError, BlockingIOError):
                return None
            words = self._buffer.split()
            self.returncode = int(words[1]) if len(words) == 2 else 255
            return self.returncode



def server_environment(config: Mapping[str, Any], inherited: Mapping[str, str]) -> dict[str, str]:
    """The bridge's environment for its child, made a real-server world: no ``PYTHON*``
    (the kit's path must not reach the server's interpreter), the world's palace unless the
    bridge named one, and the configured extras (embedding stub, hub forwarding off)."""
    env = {k: v for k, v in inherited.items() if not k.startswith("PYTHON")}
    env.setdefault("MEMPALACE_PALACE_PATH", str(config["palace"]))
    env.update({str(k): str(v) for k, v in dict(config.get("env") or {}).items()})
    return env


def spawn_early(config_path: str) -> ZygoteProcess | None:
    """The stdio relay's real server, asked of the zygote before the relay imports the rest of
    the kit: mempalace's own import (about 1 s, more under load) then runs while the relay
    starts, instead of after it, as a palace's start does for the fake. None without a zygote
    (the relay starts the server cold once it runs). The relay's ``$startup`` faults still come
    first for the bridge: a failed start ends the relay, and the zygote kills this server; the
    server's stderr waits in a pipe until they are done (``ZygoteProcess.stderr``)."""
    with open(config_path, encoding="utf-8") as handle:
        config = json.load(handle)
    # its stderr is held in a pipe the relay drains once its own start-up is done: what a
    # ``$startup`` fault writes to stderr is never cut by the server's start-up lines
    read, write = os.pipe()
    try:
        proc = spawn(config, server_environment(config, os.environ), stdin=True, stdout=True,
                     stderr=write)
    finally:
        os.close(write)
    if proc is None:
        os.close(read)
        return None
    proc.stderr = os.fdopen(read, "rb", buffering=0)
    return proc


def spawn(config: Mapping[str, Any], env: Mapping[str, str], *, stdin: bool,
          stdout: bool, stderr: int | None = None) -> ZygoteProcess | None:
    """The real server of ``config["command"]`` forked by the zygote named in ``config``, with
    pipes for stdin/stdout as asked (else /dev/null, the relay's stdout) and ``stderr`` (an fd,
    else the relay's);
    None when there is no zygote or it cannot be reached (the caller starts it cold)."""
    path = config.get(CONFIG_KEY)
    entry = entry_for(config["command"])
    if not path or entry is None:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(30.0)
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    mine: list[IO[bytes] | None] = []
    theirs: list[int] = []
    for wanted, child_reads in ((stdin, True), (stdout, False)):
        if wanted:
            read, write = os.pipe()
            mine.append(os.fdopen(write, "wb", buffering=0) if child_reads
                        else os.fdopen(read, "rb", buffering=0))
            theirs.append(read if child_reads else write)
        else:  # no stdin; stdout the relay's own, as a child started cold would have it
            mine.append(None)
            theirs.append(os.open(os.devnull, os.O_RDONLY) if child_reads else os.dup(1))
    theirs.append(os.dup(2 if stderr is None else stderr))
    body = json.dumps({**entry, "env": dict(env), "cwd": os.getcwd()}).encode()
    try:
        socket.send_fds(conn, [HEADER.pack(len(body)) + body], theirs)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = conn.recv(64)
            if not chunk:
                break
            answer += chunk
    except OSError:
        answer = b""
    finally:
        for fd in theirs:
            os.close(fd)
    first, _, rest = answer.partition(b"\n")
    if not first.startswith(b"pid "):
        conn.close()
        for handle in mine:
            if handle is not None:
                handle.close()
        return None
    proc = ZygoteProcess(int(first.split()[1]), conn, mine[0], mine[1])
    proc._buffer = rest  # the exit line, when the child ended at once
    return proc
