"""What a mutation run checks before its first scenario run, and what it says of a stale line map:
coverage.py missing here or in the runner's interpreter stops ``run`` at once in one line naming
the fix; a saved map the scenario files, the bridge or the selection moved away from says what
changed, in one line, and is measured again."""

from __future__ import annotations

import importlib.util
import stat
import sys
from pathlib import Path
from typing import Any

import mutation.author as author
import mutation.measure as measure
import mutation.sessions as sessions
import pytest
from mutation.line_map import LineMap, ScenarioRun, fingerprint, load, parts, stale


def fake_python(tmp_path: Path, code: int) -> Path:
    """A 'python' that exits ``code`` whatever it is asked (an interpreter without coverage when
    ``code`` is 1)."""
    program = tmp_path / "python"
    program.write_text(f"#!/bin/sh\nexit {code}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


def console_script(tmp_path: Path, shebang: str) -> Path:
    script = tmp_path / "palace-conformance"
    script.write_text(f"#!{shebang}\nimport sys\n")
    return script


def test_coverage_missing_here_is_one_line_naming_the_extra(monkeypatch: Any) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "coverage" else real(name, *a))
    said = measure.missing_coverage("palace-conformance", {})
    assert said is not None and "\n" not in said
    assert sys.executable in said and "'.[mutation]'" in said


def coverage_here(monkeypatch: Any) -> None:
    """As if coverage.py were importable by this interpreter (the tox env of the tests has no
    ``[mutation]`` extra): the runner's interpreter is what these tests judge."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "coverage" else real(name, *a))


def test_coverage_missing_in_the_runners_interpreter_is_named(tmp_path: Path,
                                                               monkeypatch: Any) -> None:
    coverage_here(monkeypatch)
    python = fake_python(tmp_path, 1)
    runner = console_script(tmp_path, str(python))
    said = measure.missing_coverage(str(runner), {})
    assert said is not None and "\n" not in said
    assert str(python) in said and str(runner) in said and "-m pip install" in said


def test_a_runner_whose_interpreter_has_coverage_passes(tmp_path: Path, monkeypatch: Any) -> None:
    coverage_here(monkeypatch)
    assert measure.missing_coverage(str(console_script(tmp_path, str(fake_python(tmp_path, 0)))),
                                    {}) is None
    assert measure.missing_coverage(str(console_script(tmp_path, sys.executable)), {}) is None


def test_the_interpreter_is_read_from_the_shebang(tmp_path: Path) -> None:
    assert measure.interpreter_of(str(console_script(tmp_path, "/opt/py/bin/python3"))) \
        == "/opt/py/bin/python3"
    found = measure.interpreter_of(str(console_script(tmp_path, "/usr/bin/env -S sh")))
    assert found is not None and found.endswith("/sh")
    assert measure.interpreter_of(str(tmp_path / "none")) is None


def test_run_stops_before_any_scenario_run_without_coverage(
        tmp_path: Path, monkeypatch: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The check comes before the line maps' measurement (many minutes), not after it."""
    def never(*args: object) -> Any:
        raise AssertionError("a scenario run started")

    monkeypatch.setattr(author, "missing_coverage",
                        lambda runner, env: "coverage.py is not importable by X (pip install Y)")
    monkeypatch.setattr(sessions, "copy_bridge", lambda *args: 0)  # start_work's copy
    monkeypatch.setattr(sessions, "find_runner", lambda: "pc")
    for name in ("_shared_maps", "_line_map", "_judge", "_command"):
        monkeypatch.setattr(author, name, never)
    code = author.main(["run", "--out", str(tmp_path / "out"), "--module", "clock.py",
                        "--sample-each", "1", "--measure-together"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["python -m mutation.author run: coverage.py is not importable by X "
                   "(pip install Y)"]


def tree(tmp_path: Path) -> tuple[Path, list[Path]]:
    bridge = tmp_path / "palace_bridge"
    (bridge / "features").mkdir(parents=True)
    (bridge / "clock.py").write_text("x = 1\n")
    (bridge / "features" / "feeding.py").write_text("y = 2\n")
    files = []
    for name in ("feed.a", "feed.b"):
        files.append(tmp_path / f"{name}.json")
        files[-1].write_text(f'{{"id": "{name}"}}')
    return bridge, files


def saved_map(tmp_path: Path, bridge: Path, files: list[Path], keep_parts: bool = True) -> Path:
    ids = ["feed.a", "feed.b"]
    run = ScenarioRun("feed.a", "stdio")
    found = LineMap(fingerprint(bridge, files, ids), {run: frozenset({1})}, {run: 1.0}, 2.0,
                    3.0, parts(bridge, files, ids) if keep_parts else {})
    path = tmp_path / "out" / "features.feeding.json"
    found.save(path)
    assert load(path, found.fingerprint) == found  # the parts survive the round trip
    return path


def now(bridge: Path, files: list[Path], ids: tuple[str, ...] = ("feed.a", "feed.b")
        ) -> tuple[str, dict[str, str]]:
    return fingerprint(bridge, files, list(ids)), parts(bridge, files, list(ids))


def test_a_map_that_holds_or_is_missing_is_not_stale(tmp_path: Path) -> None:
    bridge, files = tree(tmp_path)
    path = saved_map(tmp_path, bridge, files)
    assert stale(path, *now(bridge, files)) is None
    assert stale(tmp_path / "nothing.json", *now(bridge, files)) is None


def test_a_changed_scenario_file_is_named(tmp_path: Path) -> None:
    bridge, files = tree(tmp_path)
    path = saved_map(tmp_path, bridge, files)
    files[1].write_text('{"id": "feed.b", "steps": []}')
    said = stale(path, *now(bridge, files))
    assert said == "1 scenario file(s) (feed.b.json) changed"
    assert load(path, now(bridge, files)[0]) is None


def test_a_changed_bridge_source_and_selection_are_named(tmp_path: Path) -> None:
    bridge, files = tree(tmp_path)
    path = saved_map(tmp_path, bridge, files)
    (bridge / "features" / "feeding.py").write_text("y = 3\n")
    extra = tmp_path / "feed.c.json"
    extra.write_text('{"id": "feed.c"}')
    said = stale(path, *now(bridge, [*files, extra], ("feed.a", "feed.b", "feed.c")))
    assert said == ("1 scenario file(s) (feed.c.json), 1 bridge file(s) (features/feeding.py), "
                    "the selection's scenario ids changed")


def test_many_changes_name_three_and_count_the_rest(tmp_path: Path) -> None:
    bridge, files = tree(tmp_path)
    path = saved_map(tmp_path, bridge, files)
    for n in range(5):
        (bridge / f"m{n}.py").write_text("z = 0\n")
    said = stale(path, *now(bridge, files))
    assert said == "5 bridge file(s) (m0.py, m1.py, m2.py and 2 more) changed"


def test_a_map_saved_without_its_parts_says_something_changed(tmp_path: Path) -> None:
    bridge, files = tree(tmp_path)
    path = saved_map(tmp_path, bridge, files, keep_parts=False)
    files[0].write_text("{}")
    said = stale(path, *now(bridge, files))
    assert said is not None and "changed since it was measured" in said


def test_an_unreadable_map_says_so(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text("{")
    assert stale(path, "f", {}) == "it cannot be read"
    path.write_text('{"format": 1}')
    assert stale(path, "f", {}) == "it is of another format"


def test_run_says_in_one_line_that_a_stale_map_is_measured_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bridge, files = tree(tmp_path)
    path = saved_map(tmp_path, bridge, files)
    files[0].write_text('{"id": "feed.a", "changed": true}')
    author._say_stale("features/feeding.py", path, *now(bridge, files))
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["features/feeding.py: saved line map is stale (1 scenario file(s) "
                   "(feed.a.json) changed): measuring it again"]


def test_the_report_notes_results_judged_before_a_change(tmp_path: Path, monkeypatch: Any) -> None:
    bridge, files = tree(tmp_path)
    path = saved_map(tmp_path, bridge, files)
    out = path.parent.parent
    (out / "coverage").mkdir()
    path.rename(out / "coverage" / path.name)
    (out / "results.json").write_text('{"features/feeding.py:1:0:CutString": {}}')
    monkeypatch.setattr(author, "BRIDGE_DIR", bridge)
    scenarios = [type("S", (), {"id": f.stem, "path": str(f)})() for f in files]
    chosen = {"features/feeding.py": ["feed.a", "feed.b"]}
    assert author.stale_notes(out, chosen, scenarios) == []
    files[1].write_text("{}")
    assert author.stale_notes(out, chosen, scenarios) == [
        "note: features/feeding.py's results were judged before 1 scenario file(s) "
        "(feed.b.json) changed (its saved line map is stale): a survivor may be killed now"]
