"""``diff`` and ``matrix`` reuse the runs they already have: saved results (``--from``) are read,
never re-run, and one invocation runs each bridge once, however many comparisons it serves.

Each test counts the runs two ways: calls of the runner's ``run_suite`` (one per bridge run) and
starts of a real host process that appends a line per start."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.runner.execution import suite

from . import test_cli
from .support import eager_steps, result, run, save
from .test_cli import MUTANT, Cli

cli = test_cli.cli  # the command in this process, as test_cli runs it (a fixture)

COUNTING = Path(__file__).resolve().parent / "counting_host.py"
SCENARIO = "tool.errors.codes-and-data-kept"
ONE = ("--select", SCENARIO, "--transport", "stdio")


def counting_bridge(starts: Path) -> str:
    return shlex.join([sys.executable, str(COUNTING), str(starts)])


def started(starts: Path) -> int:
    return len(starts.read_text().splitlines()) if starts.exists() else 0


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The host argv of every bridge run (``run_suite`` call), in order; the runs are real."""
    seen: list[str] = []
    real = suite.run_suite

    def counted(scenarios: Any, options: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(" ".join(options.run.host_argv))
        return real(scenarios, options, *args, **kwargs)

    monkeypatch.setattr(suite, "run_suite", counted)
    yield seen


def test_saved_results_on_every_side_run_no_bridge(cli: Cli, runs: list[str],
                                                    tmp_path: Path) -> None:
    wake = "wake.fresh-session.inject-once"
    a = save(tmp_path / "a.json", run(result(wake, "stdio", eager_steps())))
    b = save(tmp_path / "b.json", run(result(wake, "stdio", eager_steps())))
    c = save(tmp_path / "c.json", run(result(wake, "stdio", eager_steps())))
    done = cli("diff", "--from", f"one={a}", "--from", f"two={b}", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    done = cli("diff", "--from", f"one={a}", "--from", f"two={b}", "--from", f"three={c}",
               cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 comparisons against one (one run of each bridge): none drifts" in done.stdout
    done = cli("matrix", "--from", f"one={a}", "--from", f"two={b}", "--from", f"three={c}",
               "--markdown", str(tmp_path / "m.md"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| `one` |" in (tmp_path / "m.md").read_text()
    assert runs == []


def test_diff_runs_the_first_bridge_once_for_every_comparison(cli: Cli, runs: list[str],
                                                              tmp_path: Path) -> None:
    """``diff A B C``: A against B and against C, A run once; its host starts as often as in
    a single run of that selection."""
    alone, shared = tmp_path / "alone.starts", tmp_path / "shared.starts"
    done = cli("run", "--bridge", counting_bridge(alone), *ONE, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert started(alone) >= 1
    runs.clear()
    mutant = " ".join([*MUTANT, "errors-as-exception"])
    done = cli("diff", "--bridge", counting_bridge(shared), "--bridge", "reference",
               "--bridge", mutant, *ONE, "--json", str(tmp_path / "d.json"), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr  # the mutant drifts
    assert len(runs) == 3, runs  # three bridges, three runs: the first is not run per view
    assert started(shared) == started(alone)
    data = json.loads((tmp_path / "d.json").read_text())
    assert [[b["label"] for b in r["bridges"]] for r in data["reports"]] == [
        [data["against"], "reference"], [data["against"], mutant]]
    assert [r["ok"] for r in data["reports"]] == [True, False] and data["ok"] is False
    assert f"1 with drift or not compared ({mutant})" in done.stdout


def test_runs_saved_by_one_command_are_read_by_the_next(cli: Cli, runs: list[str],
                                                        tmp_path: Path) -> None:
    """``matrix --save-runs`` then ``diff --from`` the saved reference: only the new bridge
    runs, and the saved one's host never starts again."""
    starts = tmp_path / "ref.starts"
    done = cli("matrix", "--bridge", counting_bridge(starts), *ONE, "--markdown",
               str(tmp_path / "m.md"), "--save-runs", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [saved] = sorted((tmp_path / "runs").glob("*.json"))
    before = started(starts)
    runs.clear()
    done = cli("diff", "--from", f"ref={saved}", "--bridge", "reference", *ONE,
               "--save-runs", str(tmp_path / "again"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(runs) == 1 and "counting_host" not in runs[0]
    assert started(starts) == before
    assert sorted(p.name for p in (tmp_path / "again").glob("*.json")) == [
        "ref.json", "reference.json"]
