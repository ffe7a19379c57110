"""``palace-conformance hosts install|status`` and ``host_command``: setup and bridge specs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from palace_conformance.hosts import node

from .support import EXTENSIONS

LAUNCH = "from palace_conformance.cli import main; main()"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True, text=True,
                          timeout=120, env=env, check=False)


def test_install_is_idempotent_and_status_reports_it(node_hosts: node.Installation) -> None:
    started = time.monotonic()
    again = cli("hosts", "install")
    assert again.returncode == 0, again.stderr
    assert time.monotonic() - started < 10  # nothing to do the second time
    assert f"node: {node_hosts.node} ({node_hosts.node_version}" in again.stdout
    assert f"hosts: {node_hosts.node_modules}" in again.stdout
    assert "pi-mcp-adapter@2.36.0" in again.stdout
    status = cli("hosts", "status", "--json")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["installed"] is True and info["home"] == node_hosts.home
    version = node.parse_version(info["installation"]["node_version"])
    assert version is not None and version >= node.NODE_MIN
    assert info["pinned"]["@earendil-works/pi-mcp"] == "1.6.0"
    assert Path(node_hosts.node_modules, "@earendil-works", "pi-mcp", "package.json").is_file()


def test_install_without_npm_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty), "HOME": str(tmp_path),
           node.ENV_HOME: str(tmp_path / "node-home")}
    done = cli("hosts", "install", env=env)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "npm not found on PATH" in done.stderr
    assert "Traceback" not in done.stderr
    status = cli("hosts", "status", env=env)
    assert status.returncode == 1 and "installed: no" in status.stdout
    assert "npm: not found" in status.stdout


def test_bridge_specs_resolve_to_host_argv(node_hosts: node.Installation) -> None:
    mirror = EXTENSIONS / "mirror.ts"
    argv = node.host_command(f"pi-extension:{mirror}?capabilities=stdio,http")
    assert argv[:2] == ["/bin/sh", "-c"] and argv[2].startswith("exec 3>&1 1>&2;")
    assert argv[3] == str(node.compile_cache_dir(node_hosts))
    assert argv[4] == node_hosts.node and argv[5].endswith("extension-host.mjs")
    assert node.is_host_argv(argv) and not node.is_host_argv(["node", *argv[4:]])
    assert argv[-4:] == ["--extension", str(mirror), "--capabilities", "stdio,http"]
    assert node.host_command("pi-mcp")[-2:] == ["--mode", "raw"]
    assert node.host_command("pi-mcp:wrapped")[-2:] == ["--mode", "wrapped"]
    assert node.host_command("pi-mcp-adapter")[-2:] == ["--preset", "pi-mcp-adapter"]
    assert all(node.is_node_spec(s) for s in ("pi-mcp", "pi-mcp-adapter", "pi-extension:x.ts"))
    assert not node.is_node_spec("reference")


@pytest.mark.parametrize(("spec", "problem"), [
    ("pi-extensions:x.ts", "unknown bridge 'pi-extensions:x.ts'"),
    ("pi-extension:", "needs a file"),
    ("pi-extension:/no/such/bridge.ts", "no such file /no/such/bridge.ts"),
    (f"pi-extension:{EXTENSIONS / 'mirror.ts'}?colour=red", "unknown option 'colour'"),
    # refused at once, not after a host start and a failed import (39 s)
    (f"pi-extension:{EXTENSIONS / 'realworld' / 'README.md'}",
     "is not a TypeScript or JavaScript module"),
])
def test_bad_specs_are_one_line_errors(spec: str, problem: str) -> None:
    with pytest.raises(node.HostSpecError) as caught:
        node.host_command(spec, install=False)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_home_is_keyed_by_the_lockfiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(node.ENV_HOME, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert node.node_home() == tmp_path / "palace-conformance" / "node-hosts" / node.lock_digest()
    monkeypatch.setenv(node.ENV_HOME, str(tmp_path / "elsewhere"))
    assert node.node_home() == tmp_path / "elsewhere"
    assert node.read_installation() is None  # nothing there: host_command would install
    with pytest.raises(node.NodeHostError, match="hosts install"):
        node.host_command("pi-mcp", install=False)
    assert os.environ[node.ENV_HOME] == str(tmp_path / "elsewhere")


def test_install_warms_the_transpile_cache(node_hosts: node.Installation,
                                           tmp_path: Path) -> None:
    """A cold pi-mcp-adapter load costs seconds; ``hosts install`` pays them once, not the first
    run's scenarios (whose deadlines they could push past)."""
    cache = tmp_path / "jiti-cache"
    took = node.warm_transpile_cache(str(cache))
    assert took > 0 and any(cache.rglob("*")), "the adapter's transpiled modules are cached"
    again = cli("hosts", "install")  # warms the real cache if it is cold, else says it is warm
    assert again.returncode == 0 and "transpile cache: warm" in again.stdout, again.stderr
    assert "bundles: @earendil-works/pi-mcp, @earendil-works/pi-schema, typebox" in again.stdout
