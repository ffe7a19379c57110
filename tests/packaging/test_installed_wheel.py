"""The built wheel, installed (``tox -e wheel``): what a user gets from ``pip install`` must run the
catalogue without a checkout. Deselected elsewhere: it needs the package installed, not editable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import palace_bridge
import palace_conformance
from palace_conformance import resources
from palace_conformance.scenarios.loader import discover

pytestmark = pytest.mark.wheel
BIN = Path(sys.executable).parent
SITE = Path(sysconfig.get_paths()["purelib"]).resolve()


def test_the_packages_are_imported_from_the_install_not_a_checkout() -> None:
    for package in (palace_conformance, palace_bridge):
        assert Path(package.__file__).resolve().is_relative_to(SITE), package.__file__


def test_the_wheel_carries_the_fixtures_the_catalogue_and_the_node_hosts() -> None:
    fixtures = resources.fixtures_dir()
    assert fixtures.is_relative_to(SITE / "palace_conformance")
    paths, problems = discover()
    assert not problems and len(paths) >= 80
    for name in ("scenario", "fault-plan", "baseline"):
        assert (fixtures / "schema" / f"{name}.schema.json").is_file()
    assert resources.tool_catalogue()["tools"]
    hosts = SITE / "palace_conformance" / "hosts" / "pi"
    for name in ("package.json", "package-lock.json", "extension-host.mjs", "mcp-host.mjs",
                 "bundle.mjs", "lib/bundles.mjs"):
        assert (hosts / name).is_file(), name
    official = SITE / "palace_conformance" / "official"
    for name in ("suite/package.json", "suite/package-lock.json", "baseline.yaml"):
        assert (official / name).is_file(), name


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPALACE_", "PALACE_"))}
    env["HOME"] = str(cwd)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_the_installed_commands_run_scenarios_on_both_transports(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = _run(str(BIN / "palace-conformance"), "run", "--select", "wake.*", "--select",
                "http.session.*", "--json", str(report), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads(report.read_text())["results"]
    assert {r["transport"] for r in results} >= {"stdio", "http"}
    assert all(r["status"] == "passed" for r in results)


def test_the_installed_fake_answers_initialize(tmp_path: Path) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "wheel-test", "version": "0"}}}
    done = subprocess.run([str(BIN / "palace-fake-mcp")], input=json.dumps(request) + "\n",
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "HOME": str(tmp_path)}, cwd=tmp_path)
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "mempalace"


def test_the_installed_fake_package_serves_through_python_m(tmp_path: Path) -> None:
    from palace_conformance.fake.shims import PACKAGE_SOURCE, install_shim, python_path

    assert PACKAGE_SOURCE.is_relative_to(SITE / "palace_conformance")
    shims = tmp_path / "shims"
    install_shim(shims, python_package=True)
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18"}}
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(python_path(shims))}
    for command in ([sys.executable, "-m", "mempalace.mcp_server"],
                    [str(shims / "mempalace-light-mcp")]):
        done = subprocess.run(command, input=json.dumps(request) + "\n", capture_output=True,
                              text=True, timeout=60, check=False, env=env, cwd=tmp_path)
        answer = json.loads(done.stdout.splitlines()[0])
        assert answer["result"]["serverInfo"]["name"] in ("mempalace", "mempalace-light"), answer
