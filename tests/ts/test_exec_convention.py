"""The ``exec`` effect's ``exit_code`` is what pi 1.x's own ``exec`` reports, in both pi stand-ins.

Both the extension host (``hosts/pi/lib/fake-pi.mjs``) and the reference's ``RecordingHost``
(``palace_bridge.host.run_subprocess``) play pi's part, so a bridge's helper run must read the
same there as in pi: the child's status; ``128 + n`` when signal ``n`` ended it (143 for a
timeout's SIGTERM); ``1``, with the reason on stderr, when the program could not start. pi
1.6.0's ``execCommand`` (from the hosts' pinned node_modules) is run beside both, so a pi release
that changes the convention fails here first (docs/aligned-copies.md, "One host convention").
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from palace_bridge.host import run_subprocess
from palace_conformance.hosts import node

HERE = Path(__file__).resolve().parent
FAKE_PI = (HERE.parents[1] / "conformance" / "palace_conformance" / "hosts" / "pi" / "lib"
           / "fake-pi.mjs")

CASES = [
    {"name": "exit-3", "argv": ["sh", "-c", "exit 3"], "timeout_ms": 0},
    {"name": "missing-program", "argv": ["/nonexistent/mempalace-pi-session", "--prepare"],
     "timeout_ms": 0},
    {"name": "signal-death", "argv": ["sh", "-c", "kill -TERM $$"], "timeout_ms": 0},
    {"name": "timeout-kill", "argv": ["sleep", "30"], "timeout_ms": 300},
]
EXPECTED = {
    "exit-3": {"code": 3, "killed": False},
    "missing-program": {"code": 1, "killed": False},
    "signal-death": {"code": 143, "killed": False},
    "timeout-kill": {"code": 143, "killed": True},
}


def _python_host(case: dict[str, object]) -> dict[str, object]:
    argv = case["argv"]
    assert isinstance(argv, list)
    timeout = case["timeout_ms"]
    assert isinstance(timeout, int)
    result = asyncio.run(run_subprocess(argv, timeout_ms=timeout or None))
    return {"code": result.code, "killed": result.killed, "stderr": result.stderr != ""}


def test_both_hosts_report_exec_codes_as_pi_does(node_hosts: node.Installation) -> None:
    pi_dir = Path(node_hosts.node_modules) / "@earendil-works" / "pi-coding-agent"
    done = subprocess.run([node_hosts.node, str(HERE / "exec_codes.mjs"), str(pi_dir),
                           str(FAKE_PI), json.dumps(CASES)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    for case in CASES:
        name = str(case["name"])
        expected = EXPECTED[name]
        real, host = seen[name]["pi"], seen[name]["host"]
        python = _python_host(case)
        assert {k: real[k] for k in expected} == expected, f"{name}: pi 1.x itself reports {real}"
        assert host == real, f"{name}: the extension host reports {host}, pi {real}"
        assert python == real, f"{name}: the reference host reports {python}, pi {real}"
