"""The pi extension copy (``reference/pi``): typed, unit-tested, loaded by pi, held to the catalogue

* ``tsc --strict --noEmit`` over the copy and its tests (the copy's own pinned ``typescript``);
* its policy parts under Node's own test runner (``node --test``), as the Python reference has
  pytest tests for its policy;
* the one-file bundle (``npm run bundle``: pi-mcp bundled, the packages pi supplies external)
  loaded by pi 1.6.0's real extension loader from ``<agentDir>/extensions``, against the fake;
* the whole catalogue at seed level on both transports against ``pi-extension:mempalace.ts``,
  0 failed (about four minutes at ``--jobs 2`` on a 2-CPU machine).

The copy's ``node_modules`` (``npm ci`` from its lockfile, no install scripts) is installed once
per checkout, under a file lock so parallel workers share it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from palace_conformance.hosts import node

from .copy_modules import install as install_modules
from .support import CATALOGUE_TOOLS, clean_env, palace

ROOT = Path(__file__).resolve().parents[2]
# a first install (npm ci of the copy's lockfile) takes minutes on a loaded machine: the tests
# that need it get that long; a kill part-way leaves no half-written tree (copy_modules.py)
pytestmark = pytest.mark.timeout(900)
COPY = ROOT / "reference" / "pi"
ENTRY = COPY / "mempalace.ts"
HERE = Path(__file__).resolve().parent
LAUNCH = "from palace_conformance.cli import main; main()"
#: capabilities no pi extension has (DRIVER.md, Capabilities): never detected by observation
NEVER_A_PI_EXTENSION = {"cli", "helper_group_kill"}
PI_SUPPLIED = ("@earendil-works/pi-coding-agent", "@earendil-works/pi-ai",
               "@earendil-works/pi-agent-core", "@earendil-works/pi-tui", "typebox")


def _run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="session")
def copy_modules(node_hosts: node.Installation) -> Path:
    """``reference/pi/node_modules`` from the lockfile (typescript, esbuild, pi-mcp, typebox)."""
    npm = shutil.which("npm")
    assert npm, "npm not found on PATH: install Node.js (with npm) to test reference/pi"
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
    config = json.loads((COPY / "tsconfig.json").read_text())["compilerOptions"]
    assert config["strict"] is True and config["noEmit"] is True


def test_policy_unit_tests_pass(copy_modules: Path, node_hosts: node.Installation) -> None:
    done = _run([node_hosts.node, "--test", "test/*.test.ts", "../seed-policy/test/*.test.ts"],
                cwd=COPY,
                env=_node_env(node_hosts))
    assert done.returncode == 0, f"node --test failed:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    summary = {line.split()[1]: int(line.split()[2]) for line in done.stdout.splitlines()
               if line.startswith("# ") and len(line.split()) == 3 and line.split()[2].isdigit()}
    assert summary.get("fail") == 0 and summary.get("pass", 0) >= 30, done.stdout[-1000:]


def test_bundle_loads_in_pis_own_loader(copy_modules: Path, node_hosts: node.Installation,
                                        tmp_path: Path) -> None:
    """As a user installs it: one file in ~/.pi/agent/extensions, found and loaded by pi."""
    done = _run([node_hosts.node, str(copy_modules / "esbuild" / "bin" / "esbuild"), "mempalace.ts",
                 "--bundle", "--platform=node", "--format=esm", "--target=node22",
                 f"--outfile={tmp_path / 'mempalace.js'}",
                 *[f"--external:{name}" for name in PI_SUPPLIED]],
                cwd=COPY, env=_node_env(node_hosts))
    assert done.returncode == 0, done.stderr
    bundle = (tmp_path / "mempalace.js").read_text()
    imports = {line.split(" from ")[-1].strip('";') for line in bundle.splitlines()
               if line.startswith("import ") and " from " in line}
    assert all(name in PI_SUPPLIED or name.startswith("node:") for name in imports), imports
    assert "@earendil-works/pi-mcp" not in imports  # bundled, as ADR-044 says
    with palace(tmp_path / "palace", "stdio") as found:
        agent_dir = tmp_path / "agent"
        (agent_dir / "extensions").mkdir(parents=True)
        shutil.copy(tmp_path / "mempalace.js", agent_dir / "extensions" / "mempalace.js")
        env = found.bridge_env(MEMPALACE_FEED="0")
        env["PATH"] = f"{Path(node_hosts.node).parent}{os.pathsep}{env['PATH']}"
        pi_dir = Path(node_hosts.node_modules, "@earendil-works", "pi-coding-agent")
        loaded = _run([node_hosts.node, str(HERE / "pi_loader.mjs"), str(pi_dir), str(agent_dir),
                       str(tmp_path)], cwd=tmp_path, env=env, timeout=120)
        assert loaded.returncode == 0, loaded.stderr[-2000:]
        report = json.loads(loaded.stdout.strip().splitlines()[-1])
        assert report["errors"] == []
        [extension] = report["extensions"]
        assert len(extension["tools"]) == CATALOGUE_TOOLS
        assert extension["commands"] == ["mempalace-diary"]
        assert extension["events"] == ["agent_settled", "before_agent_start", "session_shutdown",
                                       "session_start"]
        listed = {t["name"]: t["inputSchema"] for t in _listed_tools(found.journal)}
        assert extension["schemas"]["mempalace_diary_read"] == listed["mempalace_diary_read"]
        assert found.count("initialize") == 1 and found.count("tools/list") >= 1


def _listed_tools(journal: Path) -> list[dict[str, object]]:
    for line in journal.read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") == "send" and isinstance(record.get("message"), dict):
            result = record["message"].get("result")
            tools = result.get("tools") if isinstance(result, dict) else None
            if isinstance(tools, list):
                return [tool for tool in tools if isinstance(tool, dict)]
    raise AssertionError("no tools/list answer in the journal")


@pytest.mark.timeout(1800)
def test_whole_catalogue_at_seed_level_both_transports(tmp_path: Path) -> None:
    """No --select: every scenario on both transports; the copy must fail none."""
    results = tmp_path / "results.json"
    env = clean_env(tmp_path / "home")
    done = _run([sys.executable, "-c", LAUNCH, "run", "--bridge", f"pi-extension:{ENTRY}",
                 "--level", "seed", "--transport", "both", "--jobs", "2", "--json", str(results)],
                cwd=ROOT, env=env, timeout=1800)
    data = json.loads(results.read_text())
    counts = data["counts"]
    failed = [f"{r['scenario']} [{r['transport']}]: {r['reason'][:200]}"
              for r in data["results"] if r["status"] not in ("passed", "not_applicable")]
    assert counts["failed"] == 0 and counts["not_testable"] == 0, "\n".join(failed)
    assert done.returncode == 0, done.stdout[-2000:]
    assert counts["passed"] >= 250, counts
    # not applicable only for what a pi extension cannot have: a command-line program of its
    # own (cli) and helpers killed with their process group (pi's exec signals the program)
    from palace_conformance.scenarios.loader import load_catalogue, shipped_roots

    owed = {(sc.id, t) for sc in load_catalogue(shipped_roots(slow=False)).scenarios
            if sc.subject != "fake" and set(sc.requires) & NEVER_A_PI_EXTENSION
            for t in sc.transports}
    skipped = {(r["scenario"], r["transport"]) for r in data["results"]
               if r["status"] == "not_applicable"}
    # a scenario not applicable on its transports has no parity to compare either
    parity = {(sid, t) for sid, t in skipped if t == "parity"}
    assert {sid for sid, _ in parity} <= {sid for sid, _ in owed}, sorted(parity)
    assert skipped - parity == owed and owed, sorted((skipped - parity) ^ owed)
