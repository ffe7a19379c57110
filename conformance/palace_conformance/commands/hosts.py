"""``palace-conformance hosts install|status``: set up and inspect the Node hosts.

Imports of :mod:`.node` stay inside the handlers so other subcommands start fast.
"""

from __future__ import annotations

import argparse
import json
import sys

from palace_conformance.commands.declare import declare, declare_group


def _install(args: argparse.Namespace) -> int:
    """Install Node (when the system's is missing or too old) and the hosts' npm dependencies
    from the pinned lockfile, then warm the transpile cache; idempotent."""
    from palace_conformance.hosts import node

    try:
        found = node.ensure_installed(force=args.force)
    except node.NodeHostError as exc:
        print(f"palace-conformance hosts install: {exc}", file=sys.stderr)
        return 1
    print(f"node: {found.node} ({found.node_version}, {found.node_source})")
    print(f"hosts: {found.node_modules}")
    print("pinned: " + ", ".join(f"{k}@{v}" for k, v in sorted(found.packages.items())))
    node.ensure_bundles(found)
    bundled = node.bundles_built(found.node_modules)
    print("bundles: " + (", ".join(bundled) if bundled else "none (the hosts load every package "
                         "from its files)"))
    if node.transpile_cache_warm(found) and not args.force:
        print("transpile cache: warm")
        return 0
    try:
        took = node.warm_transpile_cache()
    except node.NodeHostError as exc:  # the hosts work; the first run just starts cold
        print(f"palace-conformance hosts install: warning: {exc}", file=sys.stderr)
    else:
        print(f"transpile cache: warmed (pi-mcp-adapter loaded once, {took:.1f} s)")
    return 0


def _status(args: argparse.Namespace) -> int:
    """Where the hosts live and what is installed: Node, npm, the cache and its CI key, the
    pinned packages; exit 1 when the hosts are not installed."""
    from palace_conformance.hosts import node

    info = node.status()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0 if info["installed"] else 1
    found = info["installation"]
    print(f"home: {info['home']}")
    if isinstance(found, dict):
        print(f"installed: yes (node {found['node_version']} from {found['node_source']}: "
              f"{found['node']})")
    else:
        print("installed: no (run 'palace-conformance hosts install')")
    system = info["system_node"]
    verdict = "ok" if info["system_node_ok"] else f"too old, needs >= {info['node_min']}"
    print(f"system node: {system} ({info['system_node_version']}, {verdict})" if system
          else "system node: none on PATH")
    print(f"npm: {info['npm'] or 'not found'}")
    cache = info["cache"]
    assert isinstance(cache, dict)
    print(f"cache: {cache['path']} (CI cache key {cache['key']})")
    bundles = info["bundles"]
    if isinstance(found, dict):
        print("bundles: " + (", ".join(map(str, bundles)) if isinstance(bundles, list) and bundles
                             else "none"))
    pinned = info["pinned"]
    assert isinstance(pinned, dict)
    print("pinned: " + ", ".join(f"{k}@{v}" for k, v in sorted(pinned.items()))
          + f"; runtime {info['runtime_package']}")
    return 0 if found else 1


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _, hosts_sub = declare_group(
        sub, "hosts", "install or inspect the Node hosts for TypeScript bridges",
        "The Node runtime and npm dependencies of the hosts that drive TypeScript bridges (pi "
        "extensions, pi-mcp, pi-mcp-adapter).", "hosts_command")
    install = declare(hosts_sub, "install", "install Node (if needed) and the hosts' npm "
                      "dependencies from the pinned lockfile; idempotent", _install)
    install.add_argument("--force", action="store_true", help="reinstall even if present")
    status = declare(hosts_sub, "status", "where the hosts live and what is installed (exit 1 "
                     "when not installed)", _status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
