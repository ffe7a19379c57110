"""Expected-failure baselines: the semantics (known, unlisted, stale, unknown, expired), the file
format and its one-line errors, ``baseline update``, and real runs with ``run --baseline``."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from palace_conformance.resources import fixtures_dir
from palace_conformance.runner.results import CheckRecord, RunResult, ScenarioResult
from palace_conformance.runner.verdict.baseline import (
    BaselineError,
    BaselineFile,
    Entry,
    apply_baseline,
    line_kind,
    load_baseline,
    parse_baseline,
    update_baseline,
    write_baseline,
)

from .support import GOOD, cli, one_line_error, write_scenario

TODAY = date(2026, 3, 15)
KNOWN = {"life.a.one": ("stdio", "http"), "life.a.two": ("stdio", "http"),
         "life.a.stdio-only": ("stdio",)}


def result(sid: str, transport: str, status: str = "failed") -> ScenarioResult:
    checks = [CheckRecord(sid, transport, "/steps/0/expect/ok", "fail", "expected ok true")] \
        if status == "failed" else []
    return ScenarioResult(scenario=sid, transport=transport, status=status,  # type: ignore[arg-type]
                          checks=checks)


def judged(entries: list[Entry], *results: ScenarioResult) -> RunResult:
    baseline = BaselineFile(entries, source="b.json", today=TODAY, known=KNOWN)
    return apply_baseline(RunResult(results=list(results)), baseline)


def entry(sid: str, transport: str, **kw: Any) -> Entry:
    return Entry(sid, transport, kw.pop("reason", "tracked"), **kw)


def test_a_listed_failure_passes_as_known_and_an_unlisted_one_fails() -> None:
    run = judged([entry("life.a.one", "stdio", issue="#12")],
                 result("life.a.one", "stdio"), result("life.a.one", "http", "passed"))
    assert run.ok and run.exit_code == 0
    mark = run.by_id("life.a.one", "stdio").baseline  # type: ignore[union-attr]
    assert mark is not None and mark.reason == "tracked (#12)" and mark.source == "b.json"
    assert run.counts()["known_failure"] == 1 and run.counts()["failed"] == 0
    run = judged([entry("life.a.one", "stdio")], result("life.a.one", "stdio"),
                 result("life.a.two", "stdio"))
    assert not run.ok
    assert [r.scenario for r in run.failed()] == ["life.a.two"]


def test_not_testable_is_a_failure_a_baseline_can_expect() -> None:
    run = judged([entry("life.a.one", "http")], result("life.a.one", "http", "not_testable"),
                 result("life.a.one", "stdio", "passed"))  # something judged: not an empty gate
    assert run.ok and run.results[0].baseline is not None


def test_a_listed_result_that_passes_now_fails_as_stale() -> None:
    run = judged([entry("life.a.one", "stdio")], result("life.a.one", "stdio", "passed"))
    assert not run.ok
    assert run.stale_baseline == ["life.a.one[stdio]: passes now; remove it from the baseline"]
    assert line_kind(run.stale_baseline[0]) == "stale"


def test_an_expired_entry_no_longer_excuses_its_failure() -> None:
    yesterday = date(2026, 3, 14)
    run = judged([entry("life.a.one", "stdio", expires=yesterday)],
                 result("life.a.one", "stdio"))
    assert not run.ok
    assert run.results[0].baseline is None and run.results[0].blocking
    [line] = run.stale_baseline
    assert line.startswith("life.a.one[stdio]: expired on 2026-03-14;")
    assert line_kind(line) == "expired"
    # the expiry day itself is still honoured
    run = judged([entry("life.a.one", "stdio", expires=TODAY)], result("life.a.one", "stdio"))
    assert run.ok


def test_entries_for_unknown_scenario_ids_fail_as_stale() -> None:
    run = judged([entry("life.a.one", "stdio"), entry("life.a.renamed", "*")],
                 result("life.a.one", "stdio"))
    assert not run.ok
    [line] = run.stale_baseline
    assert line.startswith("life.a.renamed[*]: unknown scenario id")
    assert line_kind(line) == "unknown"


def test_an_entry_for_a_transport_the_scenario_never_runs_on_is_stale() -> None:
    run = judged([entry("life.a.stdio-only", "http")], result("life.a.stdio-only", "stdio"))
    assert run.stale_baseline == ["life.a.stdio-only[http]: stale: the scenario never runs on "
                                  "http; remove the entry"]


def test_entries_whose_results_did_not_run_are_not_judged() -> None:
    run = judged([entry("life.a.two", "stdio", expires=date(2020, 1, 1))],
                 result("life.a.one", "stdio", "passed"))
    assert run.ok and run.stale_baseline == []


def test_a_wildcard_covers_every_transport_and_parity_and_is_stale_only_when_all_pass() -> None:
    star = [entry("life.a.one", "*")]
    run = judged(star, result("life.a.one", "stdio"), result("life.a.one", "http", "passed"),
                 result("life.a.one", "parity"))
    assert run.ok and sum(r.baseline is not None for r in run.results) == 2
    run = judged(star, result("life.a.one", "stdio", "passed"),
                 result("life.a.one", "http", "passed"))
    assert run.stale_baseline == ["life.a.one[*]: passes now; remove it from the baseline"]


def test_an_exact_entry_wins_over_the_wildcard() -> None:
    run = judged([entry("life.a.one", "*", reason="wide"), entry("life.a.one", "stdio")],
                 result("life.a.one", "stdio", "passed"), result("life.a.one", "http"))
    assert run.by_id("life.a.one", "http").baseline.reason == "wide"  # type: ignore[union-attr]
    assert run.stale_baseline == ["life.a.one[stdio]: passes now; remove it from the baseline"]


def test_the_default_known_ids_are_the_shipped_scenarios() -> None:
    baseline = BaselineFile([entry("stdio.respawn.after-crash", "stdio"),
                             entry("stdio.respawn.no-such-case", "stdio")], today=TODAY)
    lines = baseline.stale([])
    assert lines == ["stdio.respawn.no-such-case[stdio]: unknown scenario id (no such scenario; "
                     "remove the entry or fix the id)"]


# -- the file format ----------------------------------------------------------------------------

def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "baseline.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


GOOD_ENTRY = {"scenario": "life.a.one", "transport": "stdio", "reason": "r"}


def test_a_valid_file_loads_and_matches_its_schema(tmp_path: Path) -> None:
    data = {"schema_version": 1, "bridge": "mine",
            "entries": [{**GOOD_ENTRY, "issue": "https://example.invalid/1",
                         "expires": "2026-12-31"},
                        {"scenario": "life.a.two", "transport": "*", "reason": "r2"}]}
    schema = json.loads((fixtures_dir() / "schema" / "baseline.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    baseline = load_baseline(write(tmp_path, data), today=TODAY)
    assert baseline.bridge == "mine" and [e.key for e in baseline.entries] == [
        "life.a.one[stdio]", "life.a.two[*]"]
    assert baseline.entries[0].expires == date(2026, 12, 31)


@pytest.mark.parametrize(("data", "expected"), [
    ("{not json", "not valid JSON (line 1, column 2"),
    ({"entries": []}, "/: missing required field 'schema_version'"),
    ({"schema_version": 2, "entries": []}, "uses schema_version 2; this palace-conformance "
                                           "understands 1: upgrade"),
    ({"schema_version": 1, "entries": [{**GOOD_ENTRY, "transport": "ftp"}]},
     "/entries/0/transport: \"ftp\" is not allowed here (use one of"),
    ({"schema_version": 1, "entries": [{**GOOD_ENTRY, "reason": ""}]},
     "/entries/0/reason: must not be empty (say why the failure is accepted, in one line)"),
    ({"schema_version": 1, "entries": [{**GOOD_ENTRY, "expires": "31/12/2026"}]},
     "/entries/0/expires: \"31/12/2026\" does not have the expected form (write the date as "
     "YYYY-MM-DD)"),
    ({"schema_version": 1, "entries": [{**GOOD_ENTRY, "expires": "2026-02-30"}]},
     "/entries/0/expires: '2026-02-30' is not a calendar date (write YYYY-MM-DD)"),
    ({"schema_version": 1, "entries": [GOOD_ENTRY, GOOD_ENTRY]},
     "/entries/1: life.a.one[stdio] is already listed at /entries/0 (keep one entry)"),
    ({"schema_version": 1, "entries": [{**GOOD_ENTRY, "owner": "me"}]},
     "/entries/0: unknown field 'owner'"),
])
def test_malformed_files_are_one_line_errors(tmp_path: Path, data: Any, expected: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    message = str(caught.value)
    assert message.startswith(f"--baseline {path}: ") and "\n" not in message
    assert expected in message, message


def test_a_missing_file_names_the_command_that_writes_one(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match=r"no such file .*baseline update --from REPORT"):
        load_baseline(tmp_path / "nope.json")


# -- baseline update ------------------------------------------------------------------------------

def test_update_keeps_governance_of_entries_that_still_apply() -> None:
    old = parse_baseline({"schema_version": 1, "bridge": "old", "entries": [
        {"scenario": "life.a.one", "transport": "stdio", "reason": "kept reason",
         "issue": "#1", "expires": "2030-01-01"},
        {"scenario": "life.a.two", "transport": "*", "reason": "still failing somewhere"},
        {"scenario": "life.a.stdio-only", "transport": "stdio", "reason": "fixed since"},
        {"scenario": "life.a.elsewhere", "transport": "http", "reason": "not in this report"},
    ]}, "b.json")
    run = RunResult(results=[result("life.a.one", "stdio"), result("life.a.one", "http"),
                             result("life.a.two", "http"), result("life.a.two", "stdio", "passed"),
                             result("life.a.stdio-only", "stdio", "passed")])
    update = update_baseline(run, old, reason="new", issue="#9", expires=date(2027, 1, 1))
    assert [e.key for e in update.kept] == ["life.a.one[stdio]", "life.a.two[*]",
                                            "life.a.elsewhere[http]"]
    assert update.kept[0] == old.entries[0]  # reason, issue and expiry untouched
    assert [e.key for e in update.dropped] == ["life.a.stdio-only[stdio]"]
    assert update.added == [Entry("life.a.one", "http", "new", "#9", date(2027, 1, 1))]
    assert update.baseline.bridge == "old"


def test_update_from_nothing_lists_every_failure(tmp_path: Path) -> None:
    run = RunResult(results=[result("life.a.one", "stdio"), result("life.a.one", "parity"),
                             result("life.a.two", "stdio", "not_testable"),
                             result("life.a.two", "http", "not_applicable")])
    update = update_baseline(run, None, reason="because")
    path = tmp_path / "b.json"
    write_baseline(update.baseline, path)
    again = load_baseline(path)
    assert sorted(e.key for e in again.entries) == ["life.a.one[parity]", "life.a.one[stdio]",
                                                    "life.a.two[stdio]"]
    assert apply_baseline(run, again).ok


# -- real runs ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("scenarios")
    write_scenario(directory, "life.rep.passes", {"ok": True})
    write_scenario(directory, "life.rep.fails", {"ok": False})
    return directory


def run_with(capsys: pytest.CaptureFixture[str], suite: Path, *args: str) -> tuple[int, str,
                                                                                     str]:
    return cli(capsys, "run", str(suite), "--bridge", GOOD, "--transport", "stdio",
               "--level", "seed", *args)


def baseline_file(tmp_path: Path, *entries: dict[str, Any]) -> str:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"schema_version": 1, "entries": list(entries)}))
    return str(path)


FAILS = {"scenario": "life.rep.fails", "transport": "stdio", "reason": "host ignores load"}


def test_run_baseline_exit_codes(capsys: pytest.CaptureFixture[str], suite_dir: Path,
                                 tmp_path: Path) -> None:
    code, out, _ = run_with(capsys, suite_dir)
    assert code == 1 and "life.rep.fails [stdio] covers LIFE-01:" in out

    code, out, _ = run_with(capsys, suite_dir, "--baseline", baseline_file(tmp_path, FAILS))
    assert code == 0, out
    assert "FAIL (expected)" in out and "1 known failure," in out

    stale = {"scenario": "life.rep.passes", "transport": "stdio", "reason": "was broken"}
    code, out, _ = run_with(capsys, suite_dir, "--baseline", baseline_file(tmp_path, FAILS, stale))
    assert code == 1
    assert "stale baseline entry: life.rep.passes[stdio]: passes now" in out

    expired = {**FAILS, "expires": "2000-01-01"}
    code, out, _ = run_with(capsys, suite_dir, "--baseline", baseline_file(tmp_path, expired))
    assert code == 1
    assert "life.rep.fails[stdio]: expired on 2000-01-01" in out
    assert "FAIL (expected)" not in out

    unknown = {"scenario": "life.rep.vanished", "transport": "*", "reason": "gone"}
    code, out, _ = run_with(capsys, suite_dir, "--baseline", baseline_file(tmp_path, FAILS,
                                                                           unknown))
    assert code == 1 and "life.rep.vanished[*]: unknown scenario id" in out


def test_run_refuses_a_malformed_baseline_in_one_line(capsys: pytest.CaptureFixture[str],
                                                      suite_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text('{"schema_version": 1, "entries": [{"scenario": "life.rep.fails"}]}')
    code, _, err = run_with(capsys, suite_dir, "--baseline", str(path))
    assert code == 2
    line = one_line_error(err)
    assert line.startswith(f"palace-conformance run: --baseline {path}: /entries/0: missing "
                           "required field"), line


def test_baseline_update_round_trip(capsys: pytest.CaptureFixture[str], suite_dir: Path,
                                    tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    code, _, _ = run_with(capsys, suite_dir, "--json", str(report))
    assert code == 1
    out_file = tmp_path / "conformance-baseline.json"
    code, out, err = cli(capsys, "baseline", "update", "--from", str(report), "--out",
                         str(out_file), "--reason", "host ignores load", "--issue", "#7",
                         "--expires", "2999-12-31")
    assert code == 0, err
    assert out.startswith(f"wrote {out_file}: 1 entry (0 kept, 1 added, 0 dropped as passing)")
    data = json.loads(out_file.read_text())
    schema = json.loads((fixtures_dir() / "schema" / "baseline.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    assert data["entries"] == [{"scenario": "life.rep.fails", "transport": "stdio",
                                "reason": "host ignores load", "issue": "#7",
                                "expires": "2999-12-31"}]
    code, out, _ = run_with(capsys, suite_dir, "--baseline", str(out_file))
    assert code == 0, out

    # a hand-edited reason survives the next update; an entry that passes now is dropped
    data["entries"][0]["reason"] = "waiting on upstream fix"
    data["entries"].append({"scenario": "life.rep.passes", "transport": "stdio", "reason": "x"})
    out_file.write_text(json.dumps(data))
    code, out, _ = cli(capsys, "baseline", "update", "--from", str(report), "--out",
                       str(out_file))
    assert code == 0
    assert "(1 kept, 0 added, 1 dropped as passing)" in out
    assert "dropped life.rep.passes[stdio]" in out
    again = json.loads(out_file.read_text())
    assert [e["reason"] for e in again["entries"]] == ["waiting on upstream fix"]


@pytest.mark.parametrize(("args", "expected"), [
    (("--from", "missing.json"), "--from missing.json: no such file"),
    (("--from", "REPORT", "--expires", "next week"), "--expires next week: not a date"),
    (("--from", "REPORT", "--out", "/nonexistent/dir/b.json"),
     "--out /nonexistent/dir/b.json: directory /nonexistent/dir does not exist"),
    (("--from", "REPORT", "--baseline", "BAD"), "--baseline BAD: not valid JSON"),
    (("--from", "NOTREPORT"), "not a 'palace-conformance run --json' result"),
])
def test_baseline_update_usage_problems(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        args: tuple[str, ...], expected: str) -> None:
    (tmp_path / "report.json").write_text(json.dumps({"results": []}))
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "other.json").write_text("[]")
    names = {"REPORT": str(tmp_path / "report.json"), "BAD": str(tmp_path / "bad.json"),
             "NOTREPORT": str(tmp_path / "other.json")}
    argv = [names.get(a, a) for a in args]
    expected = expected.replace("BAD", names["BAD"])
    code, _, err = cli(capsys, "baseline", "update", *argv, "--out",
                       str(tmp_path / "b.json")) if "--out" not in args else \
        cli(capsys, "baseline", "update", *argv)
    assert code == 2
    line = one_line_error(err)
    assert line.startswith("palace-conformance baseline update: ") and expected in line, line
