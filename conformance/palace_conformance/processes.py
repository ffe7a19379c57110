"""Process facts the runner and the hosts need: is a pid alive (zombies are not), what is its argv,
and how to get rid of leftovers without ever signalling a process that is not one of the run's own.

Shared by the runner and the hosts, so it imports neither. The stand-ins a bridge runs read
:data:`HOST_MARK` from here on every start, so ``subprocess`` (about 5 ms of a helper's start)
is imported only by the functions that wait on a process."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Collection, Iterable

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    import subprocess
    from typing import Protocol

    class Stoppable(Protocol):
        """What :func:`stop` needs of a process: a :class:`subprocess.Popen` or a warm child."""

        @property
        def returncode(self) -> int | None: ...

        def poll(self) -> int | None: ...

        def send_signal(self, sig: int, /) -> None: ...

        def wait(self, timeout: float | None = None) -> int: ...

        def kill(self) -> None: ...


#: a leftover is only killed when its command line mentions one of these (pid reuse guard)
_OURS = (b"palace_conformance", b"palace-conformance", b"mempalace")
#: how long :func:`marked` waits before a second look at a process whose environment read empty
EXEC_SETTLE_S = 0.05


def alive(pid: int) -> bool:
    """Running and not a zombie: a child its parent has not reaped yet is already dead."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def argv_of(pid: int) -> list[str]:
    return [a.decode("utf-8", "replace") for a in cmdline(pid).split(b"\0") if a]


def kill_leftovers(pids: Iterable[int]) -> list[int]:
    """SIGKILL each still-living pid whose command line is one of ours; returns those killed."""
    killed = []
    for pid in set(pids):
        if pid <= 1 or pid == os.getpid() or not alive(pid):
            continue
        if not any(mark in cmdline(pid) for mark in _OURS):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def pipe_inode(fd: int) -> int:
    """The inode that names the pipe behind ``fd`` in ``/proc/PID/fd`` (``pipe:[INODE]``)."""
    return os.fstat(fd).st_ino


def other_pids() -> list[int]:
    """Every process of the machine but this one (Linux ``/proc``; empty elsewhere)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    return [int(name) for name in entries if name.isdigit() and int(name) != os.getpid()]


def pipe_holders(inodes: Collection[int]) -> list[int]:
    """Every process but this one that has one of these pipes open (Linux ``/proc``; empty
    elsewhere). Holding the runner's own pipe is what makes a process one of the run's: a
    daemon a host detached with ``setsid`` is still found this way, and no stranger is."""
    wanted = {f"pipe:[{inode}]" for inode in inodes}
    holders = []
    for pid in other_pids():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or not ours to look at
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target in wanted:
                holders.append(pid)
                break
    return holders


#: the environment variable that marks a host's processes: each host gets a value of its own,
#: which every process it starts inherits (see :func:`marked`)
HOST_MARK = "PALACE_CONFORMANCE_HOST_MARK"


def new_host_mark() -> str:
    """A value of :data:`HOST_MARK` no other host of any run shares."""
    return os.urandom(16).hex()  # secrets.token_hex(16); the stand-ins import this module


def marked(mark: str) -> list[int]:
    """Every process but this one whose environment holds ``HOST_MARK=mark`` (Linux ``/proc``;
    empty elsewhere): what a host started, however it detached (``setsid``, a double fork,
    stdio on ``/dev/null``), as long as it kept the environment it was given. A process's
    ``environ`` is the one it was exec'd with, so a stranger cannot carry the value by chance,
    and a warm-forked host (not exec'd) is found by its process group instead."""
    entry = f"{HOST_MARK}={mark}".encode()
    found, unsettled = [], []
    for pid in other_pids():
        environ = _environ(pid)
        if environ == b"":  # in the middle of an exec (or a zombie): look again below
            unsettled.append(pid)
        elif environ is not None and entry in environ.split(b"\0"):
            found.append(pid)
    if unsettled:  # a host's daemon caught mid-exec would otherwise outlive the run
        time.sleep(EXEC_SETTLE_S)
        found += [pid for pid in unsettled if entry in (_environ(pid) or b"").split(b"\0")]
    return found


def _environ(pid: int) -> bytes | None:
    """The environment ``pid`` was exec'd with; None when it is gone or not ours to read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read()
    except OSError:
        return None


def kill_marked(mark: str, rounds: int = 3) -> list[int]:
    """SIGKILL every process :func:`marked` finds, again until none is left (one may fork while
    the first round runs), at most ``rounds`` times; returns those signalled."""
    killed: list[int] = []
    for _ in range(rounds):
        found = [pid for pid in marked(mark) if pid not in killed and alive(pid)]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def stop(proc: Stoppable | None,
         grace_s: float = 3.0) -> int | None:
    """SIGTERM, wait ``grace_s``, then SIGKILL; returns the exit code."""
    import subprocess

    if proc is None:
        return None
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
    return proc.returncode


def ended_by_eof(proc: subprocess.Popen[bytes], wait_s: float) -> bool:
    """Close ``proc``'s stdin (the EOF a stdio server ends on) and wait up to ``wait_s`` for it
    to exit; whether it did (the caller says what happens to one that did not)."""
    import subprocess

    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def reaped(pid: int) -> bool:
    """Gone from the process table: its parent has reaped it (a zombie is dead, not reaped)."""
    return not os.path.exists(f"/proc/{pid}")


def wait_reaped(pid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` until ``pid`` has been reaped by its parent; whether it was. A
    Node parent reaps a child in the same turn of its event loop that runs the child's ``exit``
    handlers, so a reaped child is one its parent has been told about."""
    deadline = time.monotonic() + seconds
    while not reaped(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def wait_gone(pids: Iterable[int], seconds: float) -> None:
    """Give dying processes a moment (a SIGKILLed child is reaped asynchronously)."""
    deadline = time.monotonic() + seconds
    pending = list(pids)
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if alive(p)]
        if pending:
            time.sleep(0.02)
