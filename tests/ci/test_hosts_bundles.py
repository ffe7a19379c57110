"""The Python side of the hosts' package bundles (``node.bundles_built``, ``ensure_bundles``):
which manifests count as current, and a failed build warned about once, not retried each run.
No Node is started: a build is a stand-in program."""

from __future__ import annotations

import json
from pathlib import Path

from palace_conformance.hosts import node


def _install(tmp_path: Path, program: str = "/bin/false") -> node.Installation:
    node_modules = tmp_path / "app" / "node_modules"
    (node_modules / "typebox").mkdir(parents=True)
    (node_modules / "typebox" / "package.json").write_text('{"version": "1.3.27"}')
    return node.Installation(home=str(tmp_path), node=program, node_version="v22.23.5",
                             node_source="system", node_modules=str(node_modules),
                             lock_digest=node.lock_digest(), packages={})


def _manifest(found: node.Installation, fmt: int, version: str) -> None:
    bundles = Path(found.node_modules) / ".cache" / "palace-bundles"
    bundles.mkdir(parents=True, exist_ok=True)
    (bundles / "manifest.json").write_text(json.dumps(
        {"format": fmt, "packages": {"typebox": {"version": version, "entries": {}}}}))


def test_only_a_manifest_of_this_format_and_the_installed_versions_counts(
        tmp_path: Path) -> None:
    found = _install(tmp_path)
    assert node.bundles_built(found.node_modules) is None  # none built
    _manifest(found, node.bundle_format(), "1.3.27")
    assert node.bundles_built(found.node_modules) == ["typebox"]
    _manifest(found, node.bundle_format() + 1, "1.3.27")
    assert node.bundles_built(found.node_modules) is None  # another format: rebuilt
    _manifest(found, node.bundle_format(), "1.3.26")
    assert node.bundles_built(found.node_modules) is None  # the package moved on


def test_a_failed_build_is_one_warning_and_not_retried(tmp_path: Path) -> None:
    found = _install(tmp_path)  # its "node" is /bin/false: every build fails
    lines: list[str] = []
    node.ensure_bundles(found, log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("warning: bundling the hosts' packages failed")
    assert "'palace-conformance hosts install --force' retries" in lines[0]
    node.ensure_bundles(found, log=lines.append)
    assert len(lines) == 1  # remembered for this bundle format
    assert node.bundles_built(found.node_modules) is None
