"""Issue 13 (medium): a runner killed with SIGKILL cannot clean its temp dirs; the next runner
removes those that are stale (marked by a runner that is gone, over a day old) and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from palace_conformance import processes as procs
from palace_conformance.runner.execution.warm_client import LAUNCH
from palace_conformance.runner.execution.world import OWNER_FILE, STALE_AFTER_S, clean_stale
from palace_conformance.scenarios.loader import scenarios_dir

DAY_AGO = time.time() - STALE_AFTER_S - 60
SID = "life.transport.default-stdio-child"


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def temp_dir(base: Path, name: str, pid: int | None, mark_time: float) -> Path:
    path = base / name
    (path / "home").mkdir(parents=True)
    if pid is not None:
        mark = path / OWNER_FILE
        mark.write_text(f"{pid}\n")
        os.utime(mark, (mark_time, mark_time))
    return path


def test_only_old_dirs_of_dead_runners_are_removed(tmp_path: Path) -> None:
    dead = dead_pid()
    stale = temp_dir(tmp_path, "pc-life.x-stdio-abc", dead, DAY_AGO)
    kept = [temp_dir(tmp_path, "pc-recent-stdio-abc", dead, time.time()),
            temp_dir(tmp_path, "pc-live-stdio-abc", os.getpid(), DAY_AGO),
            temp_dir(tmp_path, "pc-unmarked-stdio-abc", None, DAY_AGO),
            temp_dir(tmp_path, "other-dir", dead, DAY_AGO)]
    (tmp_path / "pc-a-link").symlink_to(stale)
    assert clean_stale(tmp_path) == [stale]
    assert not stale.exists() and all(path.exists() for path in kept)


def test_the_next_run_removes_what_a_sigkilled_runner_left(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    scenario = str(scenarios_dir() / "life" / f"{SID}.json")
    command = [sys.executable, "-c", LAUNCH, "run", scenario, "--transport", "stdio"]
    runner = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(f"pc-{SID}*/{OWNER_FILE}")):
            assert runner.poll() is None and time.monotonic() < deadline, "no run dir appeared"
            time.sleep(0.02)
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    left = [mark.parent for mark in tmp_path.glob(f"pc-*/{OWNER_FILE}")]
    assert left and all(int((p / OWNER_FILE).read_text()) == runner.pid for p in left)
    procs.wait_gone([runner.pid], 2.0)
    for path in left:
        os.utime(path / OWNER_FILE, (DAY_AGO, DAY_AGO))
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=110)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [path for path in left if path.exists()] == []
