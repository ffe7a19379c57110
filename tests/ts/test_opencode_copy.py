"""The OpenCode plugin copy (``reference/opencode``): typed and unit-tested, as the pi copy is

* ``tsc --strict --noEmit`` over the copy and its tests (the copy's own pinned ``typescript``);
* its policy parts under Node's own test runner (``node --test``): the respawn policy, the knobs,
  provenance, the answer-stream guard and the JSON-RPC id discipline, the mailbox rule.

The catalogue over the copy is in ``test_opencode_host.py``. The copy's ``node_modules`` (``npm
ci`` from its lockfile, no install scripts) is installed once per checkout, under a file lock so
parallel workers share it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from palace_conformance.hosts import node

from .copy_modules import install as install_modules

ROOT = Path(__file__).resolve().parents[2]
# a first install (npm ci, Stryker included) takes minutes on a loaded machine: the tests that need
# it get that long; a kill part-way leaves no half-written tree either way (copy_modules.py)
pytestmark = pytest.mark.timeout(900)
COPY = ROOT / "reference" / "opencode"


def _run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="session")
def copy_modules(node_hosts: node.Installation) -> Path:
    """``reference/opencode/node_modules`` from the lockfile (typescript, the SDK, the plugin
    API, Stryker)."""
    npm = shutil.which("npm")
    assert npm, "npm not found on PATH: install Node.js (with npm) for reference/opencode"
    # staged, then renamed into place: a kill mid-install leaves no half-written tree
    return install_modules(COPY, npm=npm)


def _node_env(node_hosts: node.Installation) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPALACE_", "PALACE_"))}
    env["PATH"] = f"{Path(node_hosts.node).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_copy_typechecks_strict(copy_modules: Path, node_hosts: node.Installation) -> None:
    done = _run([node_hosts.node, str(copy_modules / "typescript" / "bin" / "tsc"), "-p",
                 str(COPY / "tsconfig.json")], cwd=COPY, env=_node_env(node_hosts))
    assert done.returncode == 0, f"tsc --strict reported:\n{done.stdout}{done.stderr}"
    config = json.loads((COPY / "tsconfig.json").read_text())
    options = config["compilerOptions"]
    assert options["strict"] is True and options["noEmit"] is True
    assert "test/**/*.ts" in config["include"]  # the unit tests are typed too


def test_policy_unit_tests_pass(copy_modules: Path, node_hosts: node.Installation) -> None:
    done = _run([node_hosts.node, "--test", "test/*.test.ts", "../seed-policy/test/*.test.ts"],
                cwd=COPY,
                env=_node_env(node_hosts))
    assert done.returncode == 0, f"node --test failed:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    summary = {line.split()[1]: int(line.split()[2]) for line in done.stdout.splitlines()
               if line.startswith("# ") and len(line.split()) == 3 and line.split()[2].isdigit()}
    assert summary.get("fail") == 0 and summary.get("pass", 0) >= 17, done.stdout[-1000:]
