"""Process facts the runner and the hosts need: is a pid alive (zombies are not), what is its argv,
and how to get rid of leftovers without ever signalling a process that is not one of the run's own.

Shared by the runner and the hosts, so it imports neither."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Collection, Iterable
from typing import Protocol

#: a leftover is only killed when its command line mentions one of these (pid reuse guard)
_OURS = (b"palace_conformance", b"palace-conformance", b"mempalace")


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


def pipe_holders(inodes: Collection[int]) -> list[int]:
    """Every process but this one that has one of these pipes open (Linux ``/proc``; empty
    elsewhere). Holding the runner's own pipe is what makes a process one of the run's: a
    daemon a host detached with ``setsid`` is still found this way, and no stranger is."""
    wanted = {f"pipe:[{inode}]" for inode in inodes}
    holders = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:  # gone, or not ours to look at
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{name}/fd/{fd}")
            except OSError:
                continue
            if target in wanted:
                holders.append(int(name))
                break
    return holders


class Stoppable(Protocol):
    """What :func:`stop` needs of a process: a :class:`subprocess.Popen` or a warm child."""

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int, /) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


def stop(proc: Stoppable | None,
         grace_s: float = 3.0) -> int | None:
    """SIGTERM, wait ``grace_s``, then SIGKILL; returns the exit code."""
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


def wait_gone(pids: Iterable[int], seconds: float) -> None:
    """Give dying processes a moment (a SIGKILLed child is reaped asynchronously)."""
    deadline = time.monotonic() + seconds
    pending = list(pids)
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if alive(p)]
        if pending:
            time.sleep(0.02)
