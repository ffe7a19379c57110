"""The ``ts`` tests drive the Node hosts; they install Node and the npm dependencies themselves.

Every test here is marked ``ts`` (the default run deselects them; tox env ``interop-ts`` runs
them). Nothing is skipped: when the hosts are not installed yet, the session fixture runs
``palace-conformance hosts install`` and fails loudly if that fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from palace_conformance.hosts import node

HERE = Path(__file__).resolve().parent
LAUNCH = "from palace_conformance.cli import main; main()"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ts: drives the Node hosts for TypeScript bridges")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.ts)


@pytest.fixture(scope="session", autouse=True)
def node_hosts() -> node.Installation:
    """The installed Node hosts; installs them (runtime + npm ci) on first use."""
    found = node.read_installation()
    if found is None:
        done = subprocess.run([sys.executable, "-c", LAUNCH, "hosts", "install"],
                              capture_output=True, text=True, timeout=node.NPM_TIMEOUT_S * 2,
                              check=False)
        assert done.returncode == 0, f"hosts install failed: {done.stderr.strip()}"
        found = node.read_installation()
    assert found is not None, "hosts install reported success but nothing is installed"
    return found
