"""Snapshot drift is caught: a stored golden compared with an altered trace fails, with a diff
that names the change; the same golden compared with itself passes. Run in a child pytest so the
failure is the child's, with syrupy and the project's snapshot extension as a user has them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from palace_conformance.runner.reports.trace import dumps

from .trace_snapshot import SNAPSHOTS

GOLDEN = "life.handshake.initialize-first--stdio"
ROOT = Path(__file__).resolve().parents[2]

CHILD_TEST = '''
import copy, json
from pathlib import Path

import pytest

from tests.reporting.trace_snapshot import TraceSnapshot

HERE = Path(__file__).parent


class Here(TraceSnapshot):
    @classmethod
    def dirname(cls, *, test_location):
        return str(HERE / "snapshots")


STORED = json.loads((HERE / "snapshots" / "GOLDEN.json").read_text())


@pytest.mark.parametrize("case", ["GOLDEN"])
def test_unchanged(case, snapshot):
    assert STORED == snapshot.use_extension(Here)


@pytest.mark.parametrize("case", ["GOLDEN"])
def test_drifted(case, snapshot):
    drifted = copy.deepcopy(STORED)
    first = next(r for r in drifted["journal"] if r.get("kind") == "recv")
    first["method"] = "tools/list"  # a bridge that no longer initializes first
    assert drifted == snapshot.use_extension(Here)
'''.replace("GOLDEN", GOLDEN)


def test_the_golden_is_in_the_trace_file_form() -> None:
    text = (SNAPSHOTS / f"{GOLDEN}.json").read_text(encoding="utf-8")
    assert dumps(json.loads(text)) == text  # a bundle's trace.json diffs cleanly against it


def test_drift_from_a_stored_snapshot_fails_with_a_diff(tmp_path: Path) -> None:
    (tmp_path / "snapshots").mkdir()
    shutil.copy(SNAPSHOTS / f"{GOLDEN}.json", tmp_path / "snapshots" / f"{GOLDEN}.json")
    (tmp_path / "test_child.py").write_text(CHILD_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "syrupy", "-p",
                           "no:cacheprovider", "--rootdir", str(tmp_path), "-q",
                           "test_child.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "1 failed, 1 passed" in out
    assert "FAILED test_child.py::test_drifted" in out
    assert "1 snapshot failed" in out and "1 snapshot passed" in out
    assert '"tools/list"' in out and '"initialize"' in out  # the diff shows both sides
    # the golden itself is untouched by a failing comparison
    assert (tmp_path / "snapshots" / f"{GOLDEN}.json").read_text() == \
        (SNAPSHOTS / f"{GOLDEN}.json").read_text()
