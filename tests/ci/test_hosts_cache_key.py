"""``hosts status --json``'s cache entry: what a CI cache saves (the hosts' directory) and the key
it saves it under (platform and the lockfiles' digest), without installing anything."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from palace_conformance.hosts import node


def status(home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PALACE_CONFORMANCE_NODE_HOME": str(home)}
    return subprocess.run([str(Path(sys.executable).parent / "palace-conformance"), "hosts",
                           "status", "--json"],
                          capture_output=True, text=True, timeout=60, check=False, env=env)


def test_status_json_names_the_cache_path_and_a_key_that_follows_the_lockfiles(
        tmp_path: Path) -> None:
    done = status(tmp_path / "hosts")
    assert done.returncode == 1  # not installed there: status says so, installs nothing
    assert not (tmp_path / "hosts").exists()
    cache = json.loads(done.stdout)["cache"]
    assert cache["path"] == str((tmp_path / "hosts").resolve())
    assert cache["key"] == (f"palace-conformance-node-hosts-{platform.system().lower()}-"
                            f"{platform.machine().lower()}-{node.lock_digest()}")


def test_a_new_lockfile_means_a_new_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = node.cache_entry(tmp_path)["key"]
    monkeypatch.setattr(node, "lock_digest", lambda: "0123456789abcdef")
    assert node.cache_entry(tmp_path)["key"] != before
    assert node.cache_entry(tmp_path)["key"].endswith("-0123456789abcdef")
