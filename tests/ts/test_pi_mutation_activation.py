"""Stryker's active mutant reaches the extension host although the host replaces its environment
at ``load``: ``reference/pi/stryker/activate.mjs`` (preloaded with ``NODE_OPTIONS=--import``)
copies it into Stryker's namespace first. Without it every mutant would survive unseen."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from palace_conformance.hosts import node

ACTIVATE = Path(__file__).resolve().parents[2] / "reference" / "pi" / "stryker" / "activate.mjs"
PROBE = ("for (const k of Object.keys(process.env)) delete process.env[k];"
         "console.log(String(globalThis.__stryker__?.activeMutant));")


def _probe(node_hosts: node.Installation, mutant: str | None) -> str:
    env = {"PATH": os.environ.get("PATH", os.defpath),
           "NODE_OPTIONS": f"--import={ACTIVATE.as_uri()}"}
    if mutant is not None:
        env["__STRYKER_ACTIVE_MUTANT__"] = mutant
    done = subprocess.run([node_hosts.node, "--input-type=module", "-e", PROBE], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_active_mutant_survives_an_environment_reset(node_hosts: node.Installation) -> None:
    assert _probe(node_hosts, "17") == "17"
    assert _probe(node_hosts, None) == "undefined"
