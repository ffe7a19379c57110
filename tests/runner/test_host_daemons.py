"""Issue 13, item 4: a host that leaves a daemon holding its stdout and stderr. The driver
client's close used to wait on those pipes until the daemon exited (for ever, for one that never
does); now every wait in close has a deadline, the daemon is killed whether or not it detached
with ``setsid``, and a pipe nobody can free is abandoned rather than waited on.

A real daemon (``setsid`` and its stdio on ``/dev/null``: mode ``daemon``) holds none of the
host's pipes and used to outlive the run; it is found by the host's mark in its environment."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from palace_conformance import processes as procs
from palace_conformance.cli import main
from palace_conformance.runner.execution import driver
from palace_conformance.runner.execution.driver import DriverClient
from palace_conformance.scenarios.loader import scenarios_dir

from .daemon_host import SLEEP_S
from .support import scripted

DAEMON_HOST = Path(__file__).resolve().parent / "daemon_host.py"
SID = "tool.errors.rpc-errors-and-results-kept"


def sleepers(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()]


def reap(pids: list[int]) -> None:
    """The test's own clean-up, whatever close did."""
    for pid in pids:
        if procs.alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("mode", ["plain", "setsid", "daemon"])
def test_close_kills_a_daemon_that_holds_the_hosts_pipes(tmp_path: Path, mode: str) -> None:
    pid_file = tmp_path / "sleepers"
    host = DriverClient([sys.executable, str(DAEMON_HOST), mode, str(pid_file)], warm=False)
    with host:
        assert host.hello()["protocol"] == 1
        started = time.monotonic()
    took = time.monotonic() - started
    [sleeper] = sleepers(pid_file)
    procs.wait_gone([sleeper], 2.0)
    try:
        assert not procs.alive(sleeper), f"the {mode} daemon outlived close()"
        assert took < SLEEP_S / 10  # ended by close's deadlines, not by the daemon's own exit
    finally:
        reap([sleeper])


def test_a_pipe_nobody_can_free_is_abandoned_after_the_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder close cannot find (another user's, or one that cleared its environment): close
    still returns, leaving the pipe."""
    monkeypatch.setattr(driver.procs, "pipe_holders", lambda inodes: [])
    monkeypatch.setattr(driver.procs, "marked", lambda mark: [])
    pid_file = tmp_path / "sleepers"
    host = DriverClient([sys.executable, str(DAEMON_HOST), "setsid", str(pid_file)], warm=False)
    try:
        host.start()
        host.hello()
        started = time.monotonic()
        host.close()
        took = time.monotonic() - started
        [sleeper] = sleepers(pid_file)
        assert procs.alive(sleeper)  # it really still holds the pipes...
        assert took < SLEEP_S / 10  # ...and close did not wait for it
        assert host.proc is not None and host.proc.stdout is not None
        assert not host.proc.stdout.closed  # left to its pump, which ends when the pipe does
    finally:
        reap(sleepers(pid_file))


@pytest.mark.parametrize("mode", ["plain", "setsid", "daemon"])
def test_a_run_with_a_daemon_leaving_host_ends_and_leaves_no_daemon(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, mode: str) -> None:
    pid_file = tmp_path / "sleepers"
    bridge = shlex.join([sys.executable, str(DAEMON_HOST), mode, str(pid_file)])
    scenario = scenarios_dir() / "tool" / f"{SID}.json"
    with pytest.raises(SystemExit) as done:
        main(["run", str(scenario), "--bridge", bridge, "--level", "seed"])
    out, _ = capsys.readouterr()
    pids = sleepers(pid_file)
    try:
        assert done.value.code == 0, out
        assert len(pids) >= 2  # a host per transport (and the probe)
        procs.wait_gone(pids, 2.0)
        assert [pid for pid in pids if procs.alive(pid)] == []
    finally:
        reap(pids)


def test_marked_finds_a_detached_grandchild_by_its_mark_and_nothing_else(tmp_path: Path) -> None:
    """A shell (standing in for a bridge) double-forks a ``setsid`` sleeper with its stdio on
    /dev/null; a sleeper started without the mark beside it is left alone."""
    mark, pid_file = procs.new_host_mark(), tmp_path / "sleepers"
    script = (f"setsid sleep {SLEEP_S} </dev/null >/dev/null 2>&1 & echo $! >> '{pid_file}'")
    env = {**os.environ, procs.HOST_MARK: mark}
    subprocess.run(["sh", "-c", script], env=env, check=True, timeout=30)
    stranger = subprocess.Popen(["sleep", str(SLEEP_S)], start_new_session=True)
    [sleeper] = sleepers(pid_file)
    try:
        # `$!` is the shell's fork; under load it may still be exec'ing setsid, then sleep
        deadline = time.monotonic() + 10.0
        while procs.argv_of(sleeper)[:1] != ["sleep"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procs.marked(mark) == [sleeper]
        assert procs.kill_marked(mark) == [sleeper]
        procs.wait_gone([sleeper], 2.0)
        assert not procs.alive(sleeper) and stranger.poll() is None
    finally:
        reap([sleeper])
        stranger.kill()
        stranger.wait()


def test_close_kills_a_daemon_the_bridge_started_with_the_env_load_gave_it(tmp_path: Path) -> None:
    """A host hands its bridge the environment ``load`` carries, not its own: the mark rides
    along there too, so a detached palace child of the bridge is found."""
    pid_file = tmp_path / "sleepers"
    with DriverClient(scripted(f"loaddaemon:{pid_file}"), warm=False) as host:
        host.hello()
        assert host.request("load", {"env": {"PATH": os.environ["PATH"]}}, deadline_ms=5000).ok
    [sleeper] = sleepers(pid_file)
    procs.wait_gone([sleeper], 2.0)
    try:
        assert not procs.alive(sleeper), "the bridge's detached daemon outlived close()"
    finally:
        reap([sleeper])


def test_marked_looks_again_at_a_process_caught_mid_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/PID/environ reads empty while a process execs: one second look finds it (a
    daemon missed there would outlive the run; seen in CI under load)."""
    mark = procs.new_host_mark()
    reads = {101: [b"", f"A=1\0{procs.HOST_MARK}={mark}\0".encode()], 102: [b"", b""],
             103: [f"{procs.HOST_MARK}={mark}\0".encode()], 104: [None]}
    monkeypatch.setattr(procs, "other_pids", lambda: list(reads))
    monkeypatch.setattr(procs, "_environ", lambda pid: reads[pid].pop(0))
    assert sorted(procs.marked(mark)) == [101, 103]
