"""Coverage-guided selection: a mutant's lines → the scenario runs that execute them, the command
that makes exactly those runs, the saved map and what invalidates it, and the fallback flag."""

from __future__ import annotations

import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mutation.__main__ as cli
import pytest
from mutation.line_map import (
    LineMap,
    ScenarioRun,
    commands,
    fingerprint,
    load,
    mutant_lines,
    one_command,
    scenario_runs,
    statement_spans,
    with_parity,
)

SOURCE = '''import functools


@functools.cache
def f(a, b):
    total = sum(
        [a, b],
    )
    if (a and
            b):
        return total
    try:
        return a // b
    except ZeroDivisionError:
        return 0
'''

A_STDIO, A_HTTP = ScenarioRun("a", "stdio"), ScenarioRun("a", "http")
B_STDIO, C_HTTP = ScenarioRun("b", "stdio"), ScenarioRun("c", "http")
EVERY = [A_STDIO, A_HTTP, B_STDIO, C_HTTP]


def lines_of(start: tuple[int, int], end: tuple[int, int]) -> set[int]:
    return mutant_lines(statement_spans(SOURCE), start, end)


def test_a_mutant_stands_for_every_line_of_its_statement() -> None:
    # a line event may name any line of a statement written over several
    assert lines_of((7, 9), (7, 10)) == {6, 7, 8}


def test_a_compound_statement_is_its_header_not_its_body() -> None:
    assert lines_of((10, 12), (10, 13)) == {9, 10}
    assert lines_of((14, 11), (14, 28)) == {14}  # the except clause alone


def test_a_decorator_belongs_to_its_def_which_runs_at_import() -> None:
    assert lines_of((4, 0), (5, 0)) == {4, 5}


def test_a_position_outside_every_statement_is_its_own_line() -> None:
    assert lines_of((2, 0), (3, 0)) == {2}


def line_map(**lines: set[int]) -> LineMap:
    found = {run: frozenset(lines.get(run.key.replace("@", "_"), set())) for run in EVERY}
    return LineMap("f", found, {run: 10.0 for run in EVERY}, wall_s=45.0, module_s=25.0)


def test_a_mutant_is_judged_by_the_runs_that_execute_its_lines() -> None:
    found = line_map(a_stdio={1, 5, 6}, a_http={1, 5}, b_stdio={1, 9}, c_http={1})
    assert found.reaching({6, 7, 8}) == [A_STDIO]
    assert found.reaching({1}) == sorted(EVERY)  # import time: every run
    assert found.reaching({5, 9}) == [A_HTTP, A_STDIO, B_STDIO]


def test_a_scenario_on_both_transports_is_judged_on_both_for_its_parity() -> None:
    """A mutant only the stdio run executes can still make stdio show something HTTP does not:
    parity needs both runs, as with --selection module."""
    found = line_map(a_stdio={1, 5, 6}, a_http={1, 5}, b_stdio={1, 9}, c_http={1})
    assert with_parity(found.reaching({6}), EVERY) == [A_HTTP, A_STDIO]
    argv = commands(with_parity(found.reaching({6}), EVERY), EVERY, 1, "pc")
    assert [a[a.index("--transport") + 1] for a in argv] == ["both"]
    assert with_parity(found.reaching({9}), EVERY) == [B_STDIO]  # b runs on stdio only
    assert with_parity([], EVERY) == []


def test_a_mutant_no_run_executes_has_no_run() -> None:
    assert line_map(a_stdio={1, 5}).reaching({12}) == []


def test_the_commands_make_exactly_the_selected_runs() -> None:
    found = commands([A_STDIO, A_HTTP, B_STDIO, C_HTTP], EVERY, 2, "pc")
    assert found == [["pc", "run", "--bridge", "reference", "--transport", "both", "--jobs", "2",
                      "--select", "a", "--select", "b", "--select", "c"]]
    split = commands([A_HTTP, B_STDIO], EVERY, 1, "pc")
    by_transport = {argv[argv.index("--transport") + 1]:
                    [argv[i + 1] for i, a in enumerate(argv) if a == "--select"] for argv in split}
    assert by_transport == {"both": ["b"], "http": ["a"]}  # b runs on stdio only


def test_several_invocations_make_one_command_that_stops_at_the_first_failure() -> None:
    one = [["pc", "run", "--select", "a b"]]
    assert shlex.split(one_command(one)) == one[0]
    two = [["pc", "run", "--select", "a"], ["pc", "run", "--select", "b'c"]]
    argv = shlex.split(one_command(two))
    assert argv[:2] == ["sh", "-c"]
    assert [shlex.split(part) for part in argv[2].split(" && ")] == two


def test_the_time_limit_comes_from_the_selected_runs_with_a_floor() -> None:
    found = line_map()
    assert found.timeout([A_STDIO], 3.0, 5.0) == 30.0
    assert found.timeout(EVERY, 3.0, 5.0) == 75.0  # never looser than the whole selection's
    assert found.timeout([A_STDIO], 3.0, 60.0) == 60.0


def test_each_scenario_runs_on_its_own_transports() -> None:
    scenarios = [SimpleNamespace(id="a", transports=("stdio", "http")),
                 SimpleNamespace(id="b", transports=("stdio",)),
                 SimpleNamespace(id="z", transports=("stdio",))]
    assert scenario_runs(scenarios, ["a", "b"]) == [A_HTTP, A_STDIO, B_STDIO]


def tree(tmp_path: Path) -> tuple[Path, Path]:
    bridge = tmp_path / "palace_bridge"
    (bridge / "features").mkdir(parents=True)
    (bridge / "backoff.py").write_text("x = 1\n")
    (bridge / "features" / "diary.py").write_text("y = 2\n")
    scenario = tmp_path / "a.json"
    scenario.write_text('{"id": "a"}')
    return bridge, scenario


def test_the_saved_map_is_reused_while_its_fingerprint_holds(tmp_path: Path) -> None:
    bridge, scenario = tree(tmp_path)
    stamp = fingerprint(bridge, [scenario], ["a"])
    saved = line_map(a_stdio={1, 2}, c_http={7})
    saved = LineMap(stamp, saved.lines, saved.seconds, saved.wall_s, saved.module_s)
    saved.save(tmp_path / "out" / "backoff.json")
    assert load(tmp_path / "out" / "backoff.json", stamp) == saved


@pytest.mark.parametrize("change", ["module", "caller", "scenario", "selection"])
def test_an_edit_of_what_decides_the_map_invalidates_it(tmp_path: Path, change: str) -> None:
    bridge, scenario = tree(tmp_path)
    stamp = fingerprint(bridge, [scenario], ["a"])
    line_map(a_stdio={1}).__class__(stamp, {}, {}, 1.0).save(tmp_path / "m.json")
    selected = ["a"]
    if change == "module":
        (bridge / "backoff.py").write_text("x = 2\n")
    elif change == "caller":
        (bridge / "features" / "diary.py").write_text("y = 3\n")
    elif change == "scenario":
        scenario.write_text('{"id": "a", "steps": []}')
    else:
        selected = ["a", "b"]
    now = fingerprint(bridge, [scenario], selected)
    assert now != stamp
    assert load(tmp_path / "m.json", now) is None
    assert load(tmp_path / "m.json", stamp) is not None


def test_an_unreadable_map_is_measured_again(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text('{"format": 1, "fingerprint": "f", "runs": {"x": 1}}')
    assert load(tmp_path / "m.json", "f") is None
    assert load(tmp_path / "missing.json", "f") is None


def test_a_bad_selection_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "--selection", "everything"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "--selection" in err and "'lines'" in err and "--help" in err


@pytest.mark.parametrize("flag,taken", [([], "lines"), (["--selection", "module"], "module"),
                                        (["--selection", "lines"], "lines")])
def test_the_selection_flag_picks_how_a_module_runs(tmp_path: Path, monkeypatch: Any,
                                                    flag: list[str], taken: str) -> None:
    called: list[str] = []

    def fake(name: str) -> Any:
        def run(*args: object) -> None:
            called.append(name)
            return None  # as when the unmutated runs fail: the module is not run
        return run

    import mutation.sessions as sessions

    for name in ("init", "mark_equivalents", "copy_bridge"):
        monkeypatch.setattr(cli, name, lambda *args: 0)
    monkeypatch.setattr(sessions, "copy_bridge", lambda *args: 0)  # start_work's copy
    monkeypatch.setattr(sessions, "find_runner", lambda: "pc")
    monkeypatch.setattr(cli, "pending_keys", lambda session: {"diary.py:1:0:Op": "job"})
    monkeypatch.setattr(cli, "_run_module", fake("module"))
    monkeypatch.setattr(cli, "_run_lines", fake("lines"))
    monkeypatch.setattr(cli, "missing_coverage", lambda runner, env: None)  # tested apart
    code = cli.main(["run", "--module", "features/diary.py", "--out", str(tmp_path), *flag])
    assert code == 1
    assert called == [taken]
