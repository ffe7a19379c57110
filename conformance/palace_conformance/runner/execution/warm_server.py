"""The warm server: a process that imports the runner's programs once and forks a child for each
start the runner asks for (the runner's side, and why, is in :mod:`.warm_client`).

It reads length-prefixed JSON requests with four descriptors each (stdin, stdout, stderr and a
status pipe) from a Unix socket, answers ``pid N`` or ``error ...``, and writes each child's exit
code to its status pipe when it reaps it. Only the standard library is imported here at start-up.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any

from palace_conformance.forked_child import ended_children, run_as_main

#: imported once by the warm server, so no warm child pays for them. Besides the entry points,
#: what their children would otherwise import on first use: httpx's transport (httpcore, anyio's
#: asyncio backend, certifi) when the bridge opens its HTTP client, the stdio engine at ``load``,
#: and the subcommands the CLI registers (about 0.1 s of CPU per HTTP run)
PRELOAD = ("palace_conformance.hosts.reference", "palace_conformance.cli",
           "palace_conformance.fake.http.serve", "palace_conformance.fake.cli",
           "palace_conformance.commands.drift", "palace_conformance.commands.selftest",
           "palace_bridge.client", "palace_bridge.http", "palace_bridge.remote",
           "palace_bridge.local", "palace_bridge.stdio", "httpx", "httpcore",
           "anyio._backends._asyncio", "certifi", "concurrent.futures.thread", "jsonschema")
#: each request: this header (the JSON body's length), then the body
REQUEST_HEADER = struct.Struct("!I")
#: prctl(2) option: the signal a process gets when its parent dies
PR_SET_PDEATHSIG = 1

def serve() -> None:
    """The warm server's main loop: import everything, then fork a child per request, reap
    children and report each exit code on its status pipe. Single-threaded, so forking is safe.
    Exits when the runner closes its end (the runner is gone)."""
    sock = socket.socket(fileno=int(sys.argv[1]))
    for module in PRELOAD:
        importlib.import_module(module)
    _warm_up()
    prctl = _prctl()
    # what the imports made outlives every child: out of the collector's sight, a child's
    # collections neither walk it nor copy its pages (a full collection in a child: ~55 ms of
    # CPU without, ~7 ms with; docs/runner.md, "Where a run's CPU goes")
    gc.collect()
    gc.freeze()
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
            while len(buffer) >= REQUEST_HEADER.size and len(pending) >= 4:
                (size,) = REQUEST_HEADER.unpack_from(buffer)
                if len(buffer) < REQUEST_HEADER.size + size:
                    break
                request = json.loads(buffer[REQUEST_HEADER.size:REQUEST_HEADER.size + size])
                buffer = buffer[REQUEST_HEADER.size + size:]
                stdin, stdout, stderr, status = pending[:4]
                del pending[:4]
                try:
                    pid = _fork(request, (stdin, stdout, stderr), prctl)
                except OSError as exc:  # e.g. EAGAIN: too many processes; the runner goes cold
                    os.close(status)
                    sock.sendall(f"error cannot fork: {exc.strerror or exc}\n".encode())
                    continue
                statuses[pid] = status
                sock.sendall(f"pid {pid}\n".encode())
        _reap(statuses)


def _warm_up() -> None:
    """What every warm child would otherwise build again after the imports: the CLI's parser
    (an HTTP fake is the CLI's ``fake http``; named, like :data:`PRELOAD`, as the runner does
    not import the CLI), the tool catalogues the fake reads at start (cached per process) and
    the reference host's checks of those catalogues' schemas."""
    from palace_conformance.resources import CATALOGUES, tool_catalogue

    importlib.import_module("palace_conformance.cli").prebuild()
    importlib.import_module("palace_conformance.hosts.reference").warm_up()
    for name in CATALOGUES:
        tool_catalogue(name)


def _reap(statuses: dict[int, int]) -> None:
    for pid, code in ended_children(statuses):
        fd = statuses.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, f"{code}\n".encode())
            os.close(fd)


def _fork(request: dict[str, Any], streams: tuple[int, int, int],
          prctl: Callable[..., int] | None) -> int:
    server = os.getpid()
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
        _die_with(server, prctl)
        for source, target in zip(streams, (0, 1, 2), strict=True):
            os.dup2(source, target)
        os.closerange(3, _max_fd())
        code = _run_child(request)
    finally:
        os._exit(code)


def _prctl() -> Callable[..., int] | None:
    """Linux: libc's ``prctl``, looked up once by the server (``ctypes`` and the lookup were
    about 2 ms of every child's CPU when each child did it); elsewhere None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def _die_with(server: int, prctl: Callable[..., int] | None) -> None:
    """Linux: the child gets SIGKILL when the warm server dies. A child is in its own session, so
    a runner killed with its process group (a CI job's timeout, cosmic-ray's, which kill with
    SIGKILL) takes the server but not the child; a host whose bridge spins never reads the EOF
    that would otherwise end it. Elsewhere (``prctl`` None) nothing changes: the child ends on
    that EOF."""
    if prctl is None:
        return
    with contextlib.suppress(OSError):
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # the server died before prctl took effect
        os._exit(128 + signal.SIGKILL)


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

    def main() -> None:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        module = importlib.import_module(request["module"])
        sys.argv = [request["argv0"] or str(module.__file__), *request["args"]]
        module.main()  # only a SystemExit sets the code (its return value never did)

    return run_as_main(main)


