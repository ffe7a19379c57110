"""The pytest-like options of ``palace-conformance run`` (``-x``, ``--list``, ``--covers``,
``-q``, ``--json -``, ``--last-failed``) and ``--shard K/N`` with ``merge`` for CI fleets."""

from __future__ import annotations

import json
import shlex
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from palace_conformance.cli import main
from palace_conformance.runner import last_failed
from palace_conformance.runner.execution.suite import SuiteOptions, run_suite
from palace_conformance.runner.results import (
    FAILED,
    NOT_TESTABLE,
    PASSED,
    HostInfo,
    RunResult,
    ScenarioResult,
    ScenarioStatus,
)
from palace_conformance.runner.selection import select_shard, shard_of
from palace_conformance.runner.verdict.baseline import ExpectedFailures
from palace_conformance.scenarios.loader import load_catalogue
from palace_conformance.scenarios.model import Scenario

from .support import MUTANT, options, scripted, shipped, write_scenario

FAILING = "tool.errors.rpc-errors-and-results-kept"  # fails under errors-as-exception
PASSING = "life.transport.chosen-once-at-load"
MUTANT_BRIDGE = shlex.join([*MUTANT, "errors-as-exception"])


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return cli(capsys, "run", *args)


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every test keeps its --last-failed records apart (and out of the user's cache)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("PALACE_CONFORMANCE_LAST_FAILED_DIR", raising=False)  # the default place
    return cache


def listed_ids(out: str) -> list[str]:
    return [line.split()[0] for line in out.strip().splitlines()[:-1]]


# -- --list -----------------------------------------------------------------------------------


def test_list_prints_what_would_run_and_starts_no_host(
        capsys: pytest.CaptureFixture[str]) -> None:
    # a host that crashes on hello would make any run exit 2: --list never starts it
    code, out, err = run(capsys, "--list", "--select", "life.transport.*",
                         "--bridge", shlex.join(scripted("crash:hello")))
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[-1] == ("4 scenarios: 6 runs (one scenario on one transport each) would run "
                         "(no host started)")
    row = next(line for line in lines if line.startswith(PASSING))
    assert row.split()[1:4] == ["stdio,http", "core", "covers"]
    assert "LIFE-03, LIFE-02" in row
    assert listed_ids(out) == sorted(listed_ids(out))


def test_list_honours_the_transport(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--list", "--select", "life.transport.*", "--transport", "http")
    assert code == 0
    assert out.strip().splitlines()[-1].startswith("3 scenarios: 3 runs")
    assert "life.transport.default-stdio-child" not in out


# -- --covers ---------------------------------------------------------------------------------


def test_covers_selects_the_scenarios_covering_an_id_or_an_area(
        capsys: pytest.CaptureFixture[str]) -> None:
    scenarios = load_catalogue().scenarios
    code, out, _ = run(capsys, "--list", "--covers", "STDIO-05")
    assert code == 0
    assert set(listed_ids(out)) == {s.id for s in scenarios if "STDIO-05" in s.covers}
    code, out, _ = run(capsys, "--list", "--covers", "http", "--covers", "WAKE-01")
    assert code == 0
    assert set(listed_ids(out)) == {s.id for s in scenarios if any(
        b.startswith("HTTP-") or b == "WAKE-01" for b in s.covers)}


@pytest.mark.parametrize(("value", "nearest"), [("STDIO-5", "STDIO-05"), ("STDI0-05", "STDIO-05"),
                                                ("WAKEY", "WAKE")])
def test_an_unknown_covers_id_is_one_line_naming_the_nearest(
        capsys: pytest.CaptureFixture[str], value: str, nearest: str) -> None:
    code, _, err = run(capsys, "--list", "--covers", value)
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.startswith(f"palace-conformance run: --covers {value}: no such behaviour ID")
    assert f"did you mean {nearest}?" in line


def test_a_known_id_no_selected_scenario_covers_is_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--list", "--select", "life.*", "--covers", "WAKE-01")
    assert code == 2 and err.strip() == ("palace-conformance run: no selected scenario covers "
                                         "WAKE-01 (see palace-conformance fixtures coverage)")


def test_a_second_pattern_after_one_select_is_named_with_the_fix(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--select 'mail.*' 'feed.*'``: argparse takes the second value as a scenario path; the
    message says so and shows the repeated flag, not "a problem in the scenario files"."""
    code, out, err = run(capsys, "--list", "--select", "mail.*", "feed.*")
    assert code == 2 and out == ""
    assert err.strip() == ("palace-conformance run: 'feed.*' was read as a scenario path (it does "
                           "not exist): --select takes one pattern per use; to pass two, repeat "
                           "the flag: --select 'mail.*' --select 'feed.*'")
    code, out, _ = run(capsys, "--list", "--select", "mail.*", "--select", "feed.*")
    assert code == 0 and {i.split(".")[0] for i in listed_ids(out)} == {"mail", "feed"}
    code, _, err = cli(capsys, "diff", "--bridge", "reference", "--bridge", "reference",
                       "--select", "mail.*", "feed.*")  # diff and matrix read it alike
    assert code == 2 and "'feed.*' was read as a scenario path" in err


# -- --shard ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0/3", "4/3", "x", "1/0", "2", "1/x", "-1/3"])
def test_bad_shards_are_one_line_usage_errors(capsys: pytest.CaptureFixture[str],
                                              value: str) -> None:
    code, _, err = run(capsys, "--list", f"--shard={value}")
    assert code == 2
    assert err.strip() == (f"palace-conformance run: --shard {value}: give K/N with 1 <= K <= "
                           "N, e.g. --shard 1/4 for the first of four CI jobs")


def test_shards_split_the_selection_without_overlap(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--list")
    every = listed_ids(out)
    shards = []
    for k in (1, 2, 3):
        code, out, _ = run(capsys, "--list", "--shard", f"{k}/3")
        assert code == 0
        shards.append(listed_ids(out))
    assert sorted(id_ for shard in shards for id_ in shard) == sorted(every)
    assert all(shards), "a shard of the whole catalogue came out empty"


def test_a_scenario_keeps_its_shard_when_the_catalogue_grows(tmp_path: Path) -> None:
    scenarios = load_catalogue().scenarios
    grown = [*scenarios, *(write_scenario(tmp_path, {
        "id": f"life.extra.added-{n}", "transports": ["stdio"],
        "steps": [{"op": "load"}]}) for n in range(20))]
    for total in (2, 3, 5):
        for index in range(1, total + 1):
            before = {s.id for s in select_shard(scenarios, index, total)}
            after = {s.id for s in select_shard(grown, index, total)}
            assert after - before == {s.id for s in grown[len(scenarios):]
                                      if shard_of(s.id, total) == index}
            assert before <= after


# -- -x ---------------------------------------------------------------------------------------


def _result(scenario: str, transport: str, status: ScenarioStatus) -> ScenarioResult:
    return ScenarioResult(scenario=scenario, transport=transport, status=status)


class _Watch:
    """A progress that says when the stdio failure was reported (``-x`` has stopped by then)."""

    def __init__(self) -> None:
        self.failed = threading.Event()

    def start(self, total: int) -> None: ...

    def begin(self, scenario: Scenario, transport: str) -> None: ...

    def done(self, result: ScenarioResult) -> None:
        if result.status == FAILED:
            self.failed.set()

    def close(self) -> None: ...


def test_exitfirst_starts_nothing_after_a_failure_and_lets_runs_in_flight_finish() -> None:
    scenarios = [shipped(PASSING), shipped("life.handshake.initialize-first"),
                 shipped("life.transport.default-stdio-child")]
    both_started = threading.Barrier(2, timeout=10)
    watch = _Watch()

    def runner(scenario: Scenario, transport: str, *_: object) -> ScenarioResult:
        if scenario.id == PASSING:  # its two runs are in flight together
            both_started.wait()
            if transport == "stdio":
                return _result(scenario.id, transport, FAILED)
            assert watch.failed.wait(10)  # still in flight when the failure stops the run
            return _result(scenario.id, transport, PASSED)
        return _result(scenario.id, transport, PASSED)

    found = run_suite(scenarios, SuiteOptions(run=options(), jobs=2, exitfirst=True,
                                              order=list),  # in catalogue order
                      progress=watch, host=HostInfo(capabilities=("stdio", "http")),
                      runner=runner)
    assert [(r.scenario, r.transport, r.status) for r in found.results
            if r.transport != "parity"] == [(PASSING, "stdio", FAILED), (PASSING, "http", PASSED)]
    assert found.not_run == [("life.handshake.initialize-first", "stdio"),
                             ("life.handshake.initialize-first", "http"),
                             ("life.handshake.initialize-first", "parity"),
                             ("life.transport.default-stdio-child", "stdio")]
    assert not found.ok and found.counts()[PASSED] == 1


def test_exitfirst_does_not_stop_on_a_failure_the_baseline_expects() -> None:
    scenarios = [shipped(PASSING), shipped("life.transport.default-stdio-child")]

    def runner(scenario: Scenario, transport: str, *_: object) -> ScenarioResult:
        return _result(scenario.id, transport, NOT_TESTABLE if scenario.id == PASSING
                       else PASSED)

    found = run_suite(scenarios, SuiteOptions(run=options(), jobs=1, exitfirst=True,
                                              baseline=ExpectedFailures([PASSING])),
                      host=HostInfo(capabilities=("stdio", "http")), runner=runner)
    assert found.not_run == [] and found.ok
    assert len([r for r in found.results if r.transport != "parity"]) == 3


def test_exitfirst_reports_what_was_not_run_and_counts_none_of_it_as_passed(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    host = shlex.join(scripted("fail-load"))  # every run is not testable
    # life.transport.* but remote-never-spawns (a refused load is what it expects, so a host
    # that fails load fails it rather than being not testable): five runs and two parity
    planned = 5 + 2
    code, out, err = run(capsys, "-x", "--jobs", "1", "--select", "life.transport.[cdt]*",
                         "--bridge", host, "--json", str(tmp_path / "r.json"),
                         "--junit", str(tmp_path / "j.xml"))
    assert code == 1, err
    data = json.loads((tmp_path / "r.json").read_text())
    assert len(data["results"]) == 1 and data["results"][0]["status"] == NOT_TESTABLE
    assert len(data["not_run"]) == planned - 1 and data["counts"]["passed"] == 0
    assert data["ok"] is False
    assert f"{planned - 1} not run (stopped after the first failure)" in out.splitlines()[-1]
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == str(planned)
    assert suite.get("skipped") == str(planned - 1)


# -- -q and --json - --------------------------------------------------------------------------


def test_quiet_prints_only_the_failures_and_the_totals(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-q", "--bridge", MUTANT_BRIDGE, "--transport", "stdio",
                       "--select", FAILING, "--select", PASSING)
    assert code == 1
    lines = out.strip().splitlines()
    assert lines[0] == f"{FAILING} [stdio] covers {', '.join(shipped(FAILING).covers)}:"
    assert all(line.startswith("  /") for line in lines[1:-1])
    assert lines[-1].startswith("FAILED: 2 scenarios, 2 results: 1 passed, 1 failed")
    assert PASSING not in out and "[1/2]" not in out


def test_json_dash_keeps_stdout_pure_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--json", "-", "--select", PASSING, "--transport", "stdio")
    assert code == 0
    data = json.loads(out)
    assert [(r["scenario"], r["status"]) for r in data["results"]] == [(PASSING, PASSED)]
    assert data["bridge"] == "reference"
    assert "PASS" in err and err.strip().splitlines()[-1].startswith("OK: 1 scenario, ")


# -- --last-failed ----------------------------------------------------------------------------


def test_last_failed_reruns_only_the_last_failures(capsys: pytest.CaptureFixture[str],
                                                   own_cache: Path) -> None:
    selection = ("--bridge", MUTANT_BRIDGE, "--transport", "stdio", "--select", FAILING,
                 "--select", PASSING)
    code, out, _ = run(capsys, "--last-failed", "--list", *selection)
    assert code == 0
    assert out.splitlines()[0].startswith(f"--last-failed: no record of a previous run against "
                                          f"{MUTANT_BRIDGE} ({own_cache}")
    assert out.splitlines()[0].endswith("; running every selected scenario")
    assert sorted(listed_ids(out)[1:]) == sorted([FAILING, PASSING])
    code, _, _ = run(capsys, *selection)
    assert code == 1
    code, out, _ = run(capsys, "--lf", "--json", "-", *selection)
    assert code == 1
    data = json.loads(out)
    assert [(r["scenario"], r["transport"]) for r in data["results"]] == [(FAILING, "stdio")]
    # the other bridge has no record: the two never mix
    code, out, _ = run(capsys, "--lf", "--list", "--transport", "stdio", "--select", FAILING,
                       "--select", PASSING)
    assert code == 0 and "no record of a previous run against reference" in out


def test_last_failed_record_lives_in_the_report_dir_when_given(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, own_cache: Path) -> None:
    report = tmp_path / "report"
    code, _, _ = run(capsys, "--bridge", MUTANT_BRIDGE, "--transport", "stdio",
                     "--select", FAILING, "--report-dir", str(report))
    assert code == 1
    record = json.loads((report / last_failed.RECORD).read_text())
    assert record["bridge"] == MUTANT_BRIDGE
    assert record["failed"] == [{"scenario": FAILING, "transport": "stdio"}]
    assert not (own_cache / "palace-conformance" / "last-failed").exists()
    code, out, _ = run(capsys, "--lf", "--list", "--bridge", MUTANT_BRIDGE, "--transport",
                       "stdio", "--report-dir", str(report))
    assert out.splitlines()[0] == ("--last-failed: re-running 1 failed result(s) of the last "
                                   "run (1 scenario(s))")
    assert listed_ids(out)[1:] == [FAILING]


def test_the_record_keeps_failures_a_run_did_not_rerun() -> None:
    previous = {("a", "stdio"), ("b", "http"), ("c", "parity")}
    run_ = RunResult(results=[_result("a", "stdio", PASSED), _result("b", "stdio", FAILED)])
    assert last_failed.updated(previous, run_) == {("b", "http"), ("c", "parity"),
                                                   ("b", "stdio")}


def test_a_failed_parity_reruns_both_transports(tmp_path: Path) -> None:
    scenarios = [shipped(PASSING), shipped("life.handshake.initialize-first")]
    plan = last_failed.rerun({(PASSING, "parity")}, scenarios, "reference", tmp_path)
    assert [s.id for s in plan.scenarios] == [PASSING]
    assert plan.only == {PASSING: frozenset({"stdio", "http"})}
    empty = last_failed.rerun(set(), scenarios, "reference", tmp_path)
    assert empty.only is None and "had no failures" in empty.note


def test_a_record_of_another_bridge_is_no_record(tmp_path: Path) -> None:
    path = tmp_path / last_failed.RECORD
    last_failed.write_record(path, "pi-mcp", {(PASSING, "stdio")})
    assert last_failed.read_record(path, "pi-mcp") == {(PASSING, "stdio")}
    assert last_failed.read_record(path, "reference") is None
    assert last_failed.record_path("a") != last_failed.record_path("b")


# -- merge ------------------------------------------------------------------------------------


def statuses(path: Path) -> dict[tuple[str, str], str]:
    data = json.loads(path.read_text())
    return {(r["scenario"], r["transport"]): r["status"] for r in data["results"]}


def test_two_shards_merged_give_the_unsharded_results(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # a selection the split puts on both shards, with a failure among passes
    selection = ("--bridge", MUTANT_BRIDGE, "--select", "life.transport.*",
                 "--select", "life.handshake.*")
    code, out, _ = run(capsys, "--list", *selection, "--shard", "1/2")
    assert listed_ids(out) and len(listed_ids(out)) < 5
    code, _, _ = run(capsys, *selection, "--json", str(tmp_path / "whole.json"))
    assert code == 1
    for k in (1, 2):
        run(capsys, *selection, "--shard", f"{k}/2", "-q", "--json", str(tmp_path / f"{k}.json"))
        assert json.loads((tmp_path / f"{k}.json").read_text())["shard"] == f"{k}/2"
    code, out, _ = cli(capsys, "merge", str(tmp_path / "1.json"), str(tmp_path / "2.json"),
                       "--json", str(tmp_path / "m.json"), "--junit", str(tmp_path / "m.xml"),
                       "--markdown", str(tmp_path / "m.md"), "--html", str(tmp_path / "m.html"))
    assert code == 1
    whole, merged = statuses(tmp_path / "whole.json"), statuses(tmp_path / "m.json")
    assert merged == whole and FAILED in whole.values() and PASSED in whole.values()
    assert len(whole) == 14  # 10 runs and 4 parity results
    assert out.strip().splitlines()[-1].startswith("FAILED: 6 scenarios, 14 results")
    suite = ET.parse(tmp_path / "m.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "14"
    assert "❌ palace-conformance" in (tmp_path / "m.md").read_text()
    from palace_conformance.runner.compare.matrix import read_html_cells

    cells = {(c["data-scenario"], c["data-transport"]): c["data-status"]
             for c in read_html_cells((tmp_path / "m.html").read_text())
             if c["tag"] == "td" and "data-scenario" in c and c["data-status"] != "absent"}
    assert cells == whole


def _saved(path: Path, **changes: object) -> str:
    data = RunResult(results=[_result(PASSING, "stdio", PASSED)], bridge="reference",
                     shard="").to_json()
    data.update(changes)
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(("second", "expected"), [
    ({"bridge": "pi-mcp", "results": []},
     "is of bridge 'pi-mcp', {first} of 'reference'; merge one bridge's shards at a time"),
    ({"level": "core", "results": []}, "was judged at the core level, {first} at the seed level"),
    ({}, f"{PASSING} [stdio] is in both {{first}} and {{second}}; give each shard once"),
])
def test_merge_refuses_results_that_do_not_belong_together(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, second: dict[str, object],
        expected: str) -> None:
    first = _saved(tmp_path / "a.json")
    other = _saved(tmp_path / "b.json", **second)
    code, _, err = cli(capsys, "merge", first, other)
    assert code == 2
    [line] = err.strip().splitlines()
    assert line.startswith("palace-conformance merge: ")
    assert expected.format(first=first, second=other) in line


def test_merge_refuses_a_missing_shard(capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    one = _saved(tmp_path / "1.json", shard="1/3")
    three = _saved(tmp_path / "3.json", shard="3/3", results=[])
    code, _, err = cli(capsys, "merge", one, three)
    assert code == 2 and err.strip() == ("palace-conformance merge: shard 2/3 missing (got 1/3, "
                                         "3/3); give every shard's result")



def test_a_record_of_the_real_server_is_not_the_fakes(tmp_path: Path, own_cache: Path) -> None:
    """One bridge run against the fake and against the real palace fails different results;
    ``--last-failed`` on one must not re-run the other's."""
    fake_path = last_failed.record_path("reference", "fake")
    real_path = last_failed.record_path("reference", "real")
    assert fake_path != real_path
    assert fake_path == last_failed.record_path("reference")  # the fake's name is unchanged
    last_failed.write_record(real_path, "reference", {(FAILING, "http")}, "real")
    assert last_failed.read_record(real_path, "reference", "real") == {(FAILING, "http")}
    assert last_failed.read_record(fake_path, "reference", "fake") is None
    shared = tmp_path / "report" / last_failed.RECORD  # --report-dir: one file for both
    last_failed.write_record(shared, "reference", {(FAILING, "stdio")}, "real")
    assert last_failed.read_record(shared, "reference", "fake") is None
    assert last_failed.read_record(shared, "reference", "real") == {(FAILING, "stdio")}
    plan = last_failed.rerun(None, [shipped(PASSING)], last_failed.target("reference", "real"),
                             real_path)
    assert "against reference with --server real (" in plan.note
