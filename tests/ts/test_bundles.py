"""The hosts' package bundles (hosts/pi/bundle.mjs, lib/bundles.mjs): built at install, used by
every importer alike, one copy of a package's internals, ignored when stale, and invisible in
what a bridge does (the same schemas, validation and answers with and without them)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from palace_conformance.hosts import node
from palace_conformance.hosts.node import host_command
from palace_conformance.runner.execution.driver import DriverClient

from .support import EXTENSIONS, clean_env

ORIGIN = f"pi-extension:{EXTENSIONS / 'typebox-origin.ts'}"
BUNDLED = ["@earendil-works/pi-mcp", "@earendil-works/pi-schema", "typebox"]
LIB = node.PI_DIR / "lib"


def test_install_bundles_the_fixed_packages(node_hosts: node.Installation) -> None:
    node.ensure_bundles(node_hosts)
    assert node.bundles_built(node_hosts.node_modules) == BUNDLED
    assert node.status()["bundles"] == BUNDLED


def _drive(argv: list[str], root: Path) -> dict[str, Any]:
    """load, list_tools and three calls (coerced, out of range, not a number): what they gave."""
    root.mkdir(parents=True)
    env = clean_env(root)
    client = DriverClient(argv, env=env, stderr_path=root / "stderr.txt").start()
    try:
        def ok(op: str, **fields: Any) -> Any:
            reply = client.request(op, fields, deadline_ms=30000)
            assert reply.ok, f"{op}: {reply.error}; {client.stderr_tail(5)}"
            return reply.result
        ok("load", env=env, cwd=str(root))
        return {"tools": ok("list_tools"),
                "calls": [ok("call_tool", name="typebox_origin", args=args)
                          for args in ({"count": "3"}, {"count": 0}, {"count": "x", "tag": 1})]}
    finally:
        client.close()


def test_typebox_runs_from_its_bundle_and_a_bridge_sees_no_difference(
        tmp_path: Path, node_hosts: node.Installation) -> None:
    argv = host_command(ORIGIN)
    bundled = _drive(argv, tmp_path / "bundled")
    files = _drive([*argv, "--no-bundles"], tmp_path / "files")
    # the tool ran and typebox's code ran from the bundle, or from the package's files
    where_bundled = bundled["calls"][0]["content"][0]["text"]
    where_files = files["calls"][0]["content"][0]["text"]
    assert "/.cache/palace-bundles/typebox/" in where_bundled, where_bundled
    assert "/node_modules/typebox/build/" in where_files, where_files
    # everything else alike: the schemas, pi's validation (coercion and its messages)
    assert bundled["tools"] == files["tools"]
    assert bundled["calls"][1:] == files["calls"][1:]
    assert bundled["calls"][1]["validation"], bundled["calls"][1]
    assert bundled["calls"][2]["validation"] == ["count: expected integer, got string"]


def _package(root: Path, name: str, version: str) -> None:
    """An ESM package with two entries sharing one internal module (its identity is the test)."""
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({
        "name": name, "version": version, "type": "module",
        "exports": {".": "./index.js", "./sub": {"import": "./sub.js"}}}))
    (pkg / "state.js").write_text("export const token = {};\n")
    (pkg / "index.js").write_text('export { token } from "./state.js";\nexport const root = 1;\n')
    (pkg / "sub.js").write_text('export { token } from "./state.js";\nexport const sub = 2;\n')


PROBE = """
import { useBundles } from %(lib)s;
const used = useBundles(%(nm)s);
const root = await import("twoway");
const sub = await import("twoway/sub");
console.log(JSON.stringify({ used, same: root.token === sub.token,
  root: import.meta.resolve("twoway"), sub: import.meta.resolve("twoway/sub") }));
"""


def _probe(nm: Path) -> dict[str, Any]:
    script = nm.parent / "probe.mjs"
    script.write_text(PROBE % {"lib": json.dumps((LIB / "bundles.mjs").as_uri()),
                               "nm": json.dumps(str(nm))})
    done = subprocess.run([node.read_installation().node, str(script)],  # type: ignore[union-attr]
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_bundled_package_keeps_one_copy_of_its_internals_and_a_stale_bundle_is_ignored(
        tmp_path: Path, node_hosts: node.Installation) -> None:
    nm = tmp_path / "app" / "node_modules"
    _package(nm, "twoway", "1.0.0")
    # esbuild from the hosts' install
    for name in ("esbuild", "@esbuild"):
        (nm / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(Path(node_hosts.node_modules) / name, nm / name)
    done = subprocess.run([node_hosts.node, str(node.PI_DIR / "bundle.mjs"), "--node-modules",
                           str(nm), "--packages", "twoway"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["packages"] == ["twoway"]

    seen = _probe(nm)
    assert seen["used"] == ["twoway"]
    assert seen["same"] is True  # the two entries share the bundle's one copy of state.js
    assert "/.cache/palace-bundles/twoway/" in seen["root"]
    assert "/.cache/palace-bundles/twoway/" in seen["sub"]

    # the package is now another version than the one bundled: its files, not the bundle
    manifest = json.loads((nm / "twoway" / "package.json").read_text())
    (nm / "twoway" / "package.json").write_text(json.dumps({**manifest, "version": "1.0.1"}))
    seen = _probe(nm)
    assert seen["used"] == [] and seen["same"] is True
    assert seen["root"] == (nm / "twoway" / "index.js").as_uri()
    assert node.bundles_built(str(nm)) is None


def test_a_package_with_a_pattern_export_is_not_bundled(
        tmp_path: Path, node_hosts: node.Installation) -> None:
    nm = tmp_path / "node_modules"
    _package(nm, "twoway", "1.0.0")
    manifest = json.loads((nm / "twoway" / "package.json").read_text())
    manifest["exports"]["./locales/*"] = "./locales/*.js"
    (nm / "twoway" / "package.json").write_text(json.dumps(manifest))
    for name in ("esbuild", "@esbuild"):
        os.symlink(Path(node_hosts.node_modules) / name, nm / name)
    done = subprocess.run([node_hosts.node, str(node.PI_DIR / "bundle.mjs"), "--node-modules",
                           str(nm), "--packages", "twoway"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == "bundle.mjs: twoway has no listable exports map"
    assert not (nm / ".cache" / "palace-bundles").exists()


def test_host_modules_take_node_builtins_without_an_es_module_facade() -> None:
    """An ES-module import of a Node builtin makes its facade, which reads every export and so
    runs every lazy one (``fs.ReadStream`` loads the streams, ``http.WebSocket`` undici): about
    10 ms of CPU at every host start. The hosts take builtins with ``process.getBuiltinModule``.
    (``bundle.mjs`` runs once, at install, and may import them.)"""
    facade = re.compile(r'^\s*import\b[^;]*?\bfrom\s+"node:[^"]+"|^\s*import\s+"node:', re.M)
    sources = [p for p in (*node.PI_DIR.glob("*.mjs"), *LIB.glob("*.mjs"))
               if p.name != "bundle.mjs"]
    assert len(sources) > 10
    offenders = [p.name for p in sources if facade.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
    assert all("process.getBuiltinModule(\"node:" in p.read_text(encoding="utf-8")
               for p in (LIB / "children.mjs", LIB / "server.mjs"))
