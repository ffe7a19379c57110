"""``server kill`` on stdio: the next step starts once the bridge has reaped its child.

A fixed sleep after a SIGKILL (``{"op": "sleep", "ms": 200}``) measured the machine's load, not
the bridge: at a load average of 70 a Node bridge had not yet run its child's exit handler when
the next call came, and the call went to the dead child (``life.transport.chosen-once-at-load``
failed a correct bridge). The kill now waits, within a bound, until the child's parent has reaped
it: a Node parent runs the exit handlers in the same turn of its loop.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from palace_conformance import processes as procs
from palace_conformance.runner.execution.world import World

from .support import shipped

#: a parent that reaps its child a second after it died, as a busy bridge's loop may
SLOW_REAPER = """
import subprocess, sys, time
child = subprocess.Popen(["sleep", "60"])
print(child.pid, flush=True)
sys.stdin.readline()  # told: the kill is on its way
time.sleep(1.0)
child.wait()
time.sleep(60)
"""


def test_a_kill_returns_once_the_child_is_reaped(tmp_path: Path) -> None:
    scenario = shipped("stdio.kill.idle-child-killed-heals")
    [kill] = [step for step in scenario.steps if step.op == "server"]
    world = World(scenario, "stdio", work_root=tmp_path)
    parent = subprocess.Popen([sys.executable, "-c", SLOW_REAPER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdin is not None
        pid = int(parent.stdout.readline())
        world.journal.write_text(json.dumps(
            {"kind": "process_start", "transport": "stdio", "pid": pid}) + "\n")
        parent.stdin.write("go\n")
        parent.stdin.flush()
        started = time.monotonic()
        ok, result, error = world.server_action(kill)
        waited = time.monotonic() - started
        assert ok and error is None and result == {"pid": pid, "signal": "SIGKILL"}
        assert procs.reaped(pid), "the kill returned while its child was still unreaped"
        assert waited >= 0.5, waited  # the parent reaped it a second after the signal
    finally:
        parent.kill()
        parent.wait()
