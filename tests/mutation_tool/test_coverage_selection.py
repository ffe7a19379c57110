"""Coverage-guided selection with the real pieces: coverage.py measuring a bridge module in the
subprocesses a runner starts, and cosmic-ray's session running each mutant against only the
runs that reach it. A stand-in runner replaces ``palace-conformance`` so no scenario runs. Needs
the ``mutation`` extra (tox -e mutation-ci runs this file); without it the file is skipped."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("cosmic_ray")
pytest.importorskip("coverage")

from mutation.line_map import NO_REACH, LineMap, ScenarioRun
from mutation.measure import MeasureError, measure, measure_shared
from mutation.module_map import BRIDGE_DIR
from mutation.report import KILLED, SURVIVED
from mutation.sessions import (
    ModuleSession,
    environment,
    execute_selected,
    init,
    records,
)

TINY = '''def reached(a):
    return a + 1


def unreached(a):
    return a * 2
'''

# A runner stand-in: logs its argv and whether the module on disk is a mutant, starts a Python
# child that imports the module (where the reference host would) and calls `reached` for scenario
# "a"; fails for scenario "broken", and when the module is a mutant (a kill).
RUNNER = '''#!{python}
import json, os, subprocess, sys
argv = sys.argv[1:]
selected = [argv[i + 1] for i, a in enumerate(argv) if a == "--select"]
source = os.path.join(os.environ["PYTHONPATH"].split(os.pathsep)[-1], "palace_bridge", "tiny.py")
mutant = open(source).read() != {pristine!r}
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": argv, "mutant": mutant}}) + "\\n")
call = "t.reached(1)" if "a" in selected else "None"
if "flaky" in selected and not os.path.exists({log!r} + ".flaky"):
    open({log!r} + ".flaky", "w").close()
    sys.exit(1)  # fails the first time only, as a timing window overrun by load
subprocess.run([sys.executable, "-c", "import palace_bridge.tiny as t; " + call], check=True)
sys.exit(1 if mutant or "broken" in selected else 0)
'''

A_STDIO, A_HTTP = ScenarioRun("a", "stdio"), ScenarioRun("a", "http")
B_HTTP = ScenarioRun("b", "http")


def world(tmp_path: Path) -> tuple[ModuleSession, str, Path, dict[str, str]]:
    session = ModuleSession("tiny.py", tmp_path / "out")
    session.source.parent.mkdir(parents=True)
    session.source.write_text(TINY, encoding="utf-8")
    (session.source.parent / "__init__.py").write_text("")  # shadows the installed bridge
    log = tmp_path / "runner.log"
    runner = tmp_path / "bin" / "palace-conformance"
    runner.parent.mkdir()
    runner.write_text(RUNNER.format(python=sys.executable, pristine=TINY, log=str(log)))
    runner.chmod(runner.stat().st_mode | stat.S_IXUSR)
    env = environment(session.work)
    env["PYTHONPATH"] = str(session.work / "src")  # the stand-in finds the copy as the last entry
    return session, str(runner), log, env


def logged(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_measurement_sees_the_lines_each_run_executes_in_its_subprocesses(
        tmp_path: Path) -> None:
    session, runner, _, env = world(tmp_path)
    found = measure([A_STDIO, B_HTTP], session.source, session.work, session.stem, runner, env,
                    2, 60.0, "stamp")
    assert found.fingerprint == "stamp"
    assert found.lines[A_STDIO] == {1, 2, 5}  # the defs at import, the body `a` ran
    assert found.lines[B_HTTP] == {1, 5}
    assert all(seconds > 0 for seconds in found.seconds.values()) and found.wall_s > 0
    assert not list((session.work / "coverage" / session.stem).rglob(".coverage*"))
    assert not list(Path.cwd().glob(".coverage*"))


def test_a_run_that_fails_unmutated_twice_stops_the_measurement(tmp_path: Path) -> None:
    session, runner, log, env = world(tmp_path)
    with pytest.raises(MeasureError, match=r"broken@stdio fails unmutated.*\(twice\)"):
        measure([A_STDIO, ScenarioRun("broken", "stdio")], session.source, session.work,
                session.stem, runner, env, 1, 60.0, "stamp")
    assert sum("broken" in entry["argv"] for entry in logged(log)) == 2


def test_a_run_that_fails_once_unmutated_is_tried_again(tmp_path: Path) -> None:
    session, runner, log, env = world(tmp_path)
    flaky = ScenarioRun("flaky", "stdio")
    found = measure([A_STDIO, flaky], session.source, session.work, session.stem, runner, env,
                    1, 60.0, "stamp")
    assert found.lines[flaky] == {1, 5} and found.lines[A_STDIO] == {1, 2, 5}
    assert sum("flaky" in entry["argv"] for entry in logged(log)) == 2


def test_one_shared_pass_measures_every_file_and_names_the_runs_that_failed(
        tmp_path: Path) -> None:
    session, runner, log, env = world(tmp_path)
    other = session.source.parent / "other.py"  # a module no run imports
    other.write_text(TINY, encoding="utf-8")
    broken = ScenarioRun("broken", "stdio")
    done, failed = measure_shared([A_STDIO, B_HTTP, broken], [session.source, other],
                                  session.work, runner, env, 2, 60.0)
    assert done[A_STDIO][0] == {session.source: {1, 2, 5}, other: frozenset()}
    assert done[B_HTTP][0][session.source] == {1, 5} and done[B_HTTP][1] > 0
    assert list(failed) == [broken] and "fails unmutated" in failed[broken]
    assert len(logged(log)) == 4  # each run once, the failing one twice


def test_a_measurement_that_sees_no_line_fails_rather_than_sparing_every_mutant(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session, runner, _, env = world(tmp_path)
    # as when coverage never started in the host: the runs pass and no data file has a line
    monkeypatch.setattr("mutation.measure.executed_lines", lambda directory, source: frozenset())
    with pytest.raises(MeasureError, match=r"the coverage hook in .* did not start"):
        measure([A_STDIO, B_HTTP], session.source, session.work, session.stem, runner, env, 1,
                60.0, "stamp")


def test_each_mutant_runs_only_the_runs_that_reach_it(tmp_path: Path) -> None:
    session, runner, log, env = world(tmp_path)
    init(session, [runner, "run"], 60.0, env)
    line_map = LineMap("stamp", {A_STDIO: frozenset({1, 2, 5}), A_HTTP: frozenset({1, 5}),
                                 B_HTTP: frozenset({1, 5})},
                       {run: 1.0 for run in (A_STDIO, A_HTTP, B_HTTP)}, wall_s=3.0)
    outside = os.environ.get("PYTHONPATH")
    done = execute_selected(session, line_map, env, 1, runner, 3.0, 60.0)
    assert os.environ.get("PYTHONPATH") == outside  # the loop's environment is put back
    found = records(session)
    on_2 = [r for r in found if r.line == 2]
    on_6 = [r for r in found if r.line == 6]
    assert on_2 and on_6 and len(on_2) + len(on_6) == len(found)
    assert all(r.anchor.startswith(f"{session.module}::reached::") for r in on_2)
    assert all(r.anchor.startswith(f"{session.module}::unreached::") for r in on_6)
    assert {r.status for r in on_2} == {KILLED}
    assert {r.status for r in on_6} == {SURVIVED}
    assert {r.note for r in on_6} == {f"{NO_REACH} 6"}
    assert all(r.diff.startswith("--- mutation diff ---") for r in on_6)
    runs = logged(log)
    assert len(runs) == len(on_2) == done.ran and done.unreached == len(on_6)
    for run in runs:  # on disk while it ran; only a, the one scenario whose run reaches line
        # 2 (on stdio), judged on both its transports so that its parity is judged too
        assert run["mutant"] is True
        argv = run["argv"]
        assert isinstance(argv, list)
        assert argv[argv.index("--transport") + 1] == "both"
        assert [argv[i + 1] for i, a in enumerate(argv) if a == "--select"] == ["a"]
    assert session.source.read_text(encoding="utf-8") == TINY


def _one_session(work: Path, module: str) -> None:
    from mutation.sessions import copy_bridge, init

    copy_bridge(BRIDGE_DIR, work)
    init(ModuleSession(module, work), ["true"], 60, environment(work))


def test_report_combines_run_directories_module_by_module(tmp_path: Path, capsys) -> None:
    """Runs in parallel each write their own directory; one report reads them all, each module
    from the first directory (--out, then --from in order) that ran it."""
    from mutation.__main__ import main

    first, second = tmp_path / "first", tmp_path / "second"
    _one_session(first, "features/diary.py")
    _one_session(second, "backoff.py")
    _one_session(second, "features/diary.py")  # shadowed by --out's
    assert main(["report", "--out", str(first), "--from", str(second)]) == 0
    report = json.loads((first / "report.json").read_text())
    assert set(report["modules"]) == {"features/diary.py", "backoff.py"}
    assert report["modules"]["backoff.py"]["pending"] > 0
    alone = json.loads(json.dumps(report["modules"]["features/diary.py"]))
    assert main(["report", "--out", str(first)]) == 0
    assert json.loads((first / "report.json").read_text())["modules"] == {
        "features/diary.py": alone}
    assert main(["report", "--out", str(first), "--from", str(tmp_path / "nope")]) == 2
    assert "--from" in capsys.readouterr().err


def test_a_mutant_cosmic_ray_cannot_write_is_incompetent_not_the_end_of_the_run() -> None:
    """cosmic-ray 8.7's ExceptionReplacer fails on a dotted name in an except tuple; an
    unreached mutant's diff is written by this tool, which must not let that end the run."""
    from mutation.report import INCOMPETENT, SURVIVED
    from mutation.sessions import _status, unreached_result

    source = "try:\n    pass\nexcept (os.error, ValueError):\n    pass\n"

    def spec(occurrence: int) -> SimpleNamespace:
        return SimpleNamespace(operator_name="core/ExceptionReplacer", operator_args={},
                               occurrence=occurrence, start_pos=(3, 8))

    broken = unreached_result(source, spec(0), Path("m.py"))
    assert _status(broken) == INCOMPETENT
    assert broken.output.startswith("cosmic-ray could not write this mutant: AttributeError")
    fine = unreached_result(source, spec(1), Path("m.py"))
    assert _status(fine) == SURVIVED and "CosmicRayTestingException" in fine.diff


def test_a_larger_sample_in_the_same_directory_draws_only_the_difference(tmp_path: Path,
                                                                          capsys) -> None:
    """Extending a sample keeps what the earlier one chose (judged or pending) and draws the
    rest among the mutants it left out; the same --sample again resumes, drawing nothing."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult
    from mutation.__main__ import _sample
    from mutation.report import NOT_SAMPLED, PENDING
    from mutation.sessions import pending_keys

    session, runner, _log, env = world(tmp_path)
    init(session, [runner, "run"], 60.0, env)
    every = {r.key for r in records(session)}
    assert len(every) >= 4

    def status() -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for record in records(session):
            found.setdefault(record.status, set()).add(record.key)
        return found

    _sample(SimpleNamespace(sample=1, seed=3), [session])
    first = status()
    assert len(first[PENDING]) == 1 and len(first[NOT_SAMPLED]) == len(every) - 1
    (chosen,) = first[PENDING]
    with use_db(str(session.db), WorkDB.Mode.open) as db:  # judge it, as a run would
        db.set_result(pending_keys(session)[chosen],
                      WorkResult(worker_outcome=WorkerOutcome.NORMAL,
                                 test_outcome=TestOutcome.KILLED, output="", diff=""))
    _sample(SimpleNamespace(sample=1, seed=3), [session])  # resumes: nothing new
    assert status().get(PENDING, set()) == set()
    _sample(SimpleNamespace(sample=3, seed=4), [session])
    grown = status()
    assert len(grown[PENDING]) == 2 and chosen not in grown[PENDING]
    assert grown[KILLED] == {chosen}
    assert len(grown[NOT_SAMPLED]) == len(every) - 3
    assert "2 more drawn with seed 4" in capsys.readouterr().out
