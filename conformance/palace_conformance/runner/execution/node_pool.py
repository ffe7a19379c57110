"""Node hosts started ahead of need, so a TypeScript bridge's run does not wait for Node to start.

A Node host spends 0.1-0.2 s of CPU (and more of wall time on a busy machine) starting Node,
its own modules, jiti and pi's argument validation before it can load a bridge, and a catalogue
run starts about 320 of them. Node cannot fork, so the warm server that starts the runner's own
Python programs has no Node twin. Instead, while a suite runs (:func:`session`), a few hosts
for each host command wait started: ``PALACE_CONFORMANCE_HOST_POOLED=1`` tells a host to
import what every run imports and then wait for ``adopt``. A run takes one and sends it its
environment (its host mark included) and working directory, as though the host had been
started with them; a replacement starts at once.

What stays different from a host started for the run, and why no scenario can see it:

- Variables Node reads only as it starts (``NODE_*``, ``UV_*``, the locale, ``TZ``, OpenSSL's)
  come from the pool's start. So each pool is kept for one set of their values, and a run whose
  values differ takes no pooled host.
- The host's own ``/proc/PID/environ`` is the pool's. Nothing judges a host's own environment:
  what the bridge reads is ``process.env``, which ``adopt`` replaced, and every process it starts
  gets that (the load's environment carries the host mark, so :mod:`processes` finds them).
- The host started earlier: its uptime is longer, and nothing judges it.

``palace-conformance run --cold-start`` starts every host for its run, as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from palace_conformance import processes as procs
from palace_conformance.hosts.node import is_host_argv

#: set (to "1") in a pooled host's environment: the host preloads and waits for ``adopt``
POOLED_VARIABLE = "PALACE_CONFORMANCE_HOST_POOLED"
#: what Node (or libuv, ICU, OpenSSL under it) reads from the environment as it starts
STARTUP_PREFIXES = ("NODE_", "UV_", "LC_", "OPENSSL_", "SSL_")
STARTUP_NAMES = frozenset({"LANG", "LANGUAGE", "TZ"})
#: how long an adopt may take: a host still preloading (jiti, validation) answers after it
ADOPT_S = 30.0
REPLY_CAP = 64 * 1024  # an adopt reply is a short line; more is a host that misbehaves
STOP_S = 2.0  # how long a killed idle host may take to be reaped
MAX_KEYS = 2  # host commands (with their startup values) kept warm at once; older ones stop


@dataclass(frozen=True)
class PooledHost:
    """A started host and the host mark it was started with (its run takes that mark)."""

    proc: subprocess.Popen[bytes]
    mark: str


def startup_environment(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The part of ``env`` a Node process reads as it starts, sorted."""
    return tuple(sorted((key, value) for key, value in env.items()
                        if key.startswith(STARTUP_PREFIXES) or key in STARTUP_NAMES))


class NodeHostPool:
    """Idle pooled hosts by (host command, startup environment); thread-safe."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._idle: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]],
                         deque[PooledHost]] = {}
        self.active = 0  # open sessions; hosts are pooled only while one is open

    def take(self, argv: Sequence[str], env: Mapping[str, str],
             cwd: str | os.PathLike[str]) -> PooledHost | None:
        """A host for ``argv``, adopted into ``env`` and ``cwd`` (``env``'s host mark replaced by
        the host's own); None when there is none ready or it cannot be adopted (the caller then
        starts the host itself)."""
        if self.active == 0 or not is_host_argv(argv) or POOLED_VARIABLE in env:
            return None
        key = (tuple(argv), startup_environment(env))
        with self._lock:
            idle = self._idle.get(key)
            if idle is None:
                self._retire_beyond(MAX_KEYS - 1)
                idle = self._idle[key] = deque()
            host = idle.popleft() if idle else None
            with contextlib.suppress(OSError):  # none could start: runs start their own
                while len(idle) < self.size:
                    idle.append(_start(key[0], dict(key[1])))
        if host is None:
            return None
        if _adopt(host, {**env, procs.HOST_MARK: host.mark}, os.fspath(cwd)):
            return host
        _stop(host)
        return None

    def _retire_beyond(self, keep: int) -> None:
        while len(self._idle) > keep:
            oldest = next(iter(self._idle))
            for host in self._idle.pop(oldest):
                _stop(host)

    def close(self) -> None:
        """Stop every idle host."""
        with self._lock:
            self._retire_beyond(0)


_POOL = NodeHostPool()


@contextlib.contextmanager
def session(size: int = 2) -> Iterator[NodeHostPool]:
    """Pool Node hosts while the block runs (a suite's runs); idle ones stop when it ends."""
    with _POOL._lock:
        _POOL.active += 1
        _POOL.size = max(1, size)
    try:
        yield _POOL
    finally:
        with _POOL._lock:
            _POOL.active -= 1
            last = _POOL.active == 0
        if last:
            _POOL.close()


def take(argv: Sequence[str], env: Mapping[str, str],
         cwd: str | os.PathLike[str]) -> PooledHost | None:
    """:meth:`NodeHostPool.take` on the runner's pool (None outside a :func:`session`)."""
    return _POOL.take(argv, env, cwd)


def _start(argv: tuple[str, ...], startup: Mapping[str, str]) -> PooledHost:
    mark = procs.new_host_mark()
    env = {**startup, POOLED_VARIABLE: "1", procs.HOST_MARK: mark}
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd="/", start_new_session=True)
    return PooledHost(proc, mark)


def _adopt(host: PooledHost, env: Mapping[str, str], cwd: str) -> bool:
    """Send ``adopt`` and read its one-line reply from the raw pipe (the run's reader then
    starts on a stream nobody has read ahead of it); False for any other outcome."""
    proc = host.proc
    if proc.poll() is not None or proc.stdin is None or proc.stdout is None:
        return False
    request = {"id": 0, "op": "adopt", "env": dict(env), "cwd": cwd}
    try:
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
    except OSError:
        return False
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + ADOPT_S
    reply = b""
    while not reply.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or len(reply) > REPLY_CAP or not select.select([fd], [], [], left)[0]:
            return False
        chunk = os.read(fd, 4096)
        if not chunk:
            return False
        reply += chunk
    try:
        answer = json.loads(reply)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("id") == 0 and answer.get("ok") is True


def _stop(host: PooledHost) -> None:
    """End a host no run took: at once, with its group (it loaded no bridge and started
    nothing, so it has nothing to finish; and the pool's lock is held meanwhile)."""
    proc = host.proc
    if proc.poll() is None:  # never a group whose leader was reaped: its id may be reused
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_S)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()
