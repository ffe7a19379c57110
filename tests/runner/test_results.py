"""The result model: JSON round trip, JUnit, counts, and the baseline hook."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from palace_conformance.fake.journal import read_journal
from palace_conformance.runner.reports.junit import to_xml
from palace_conformance.runner.results import (
    CheckRecord,
    HostInfo,
    RunResult,
    ScenarioResult,
    StepRecord,
)
from palace_conformance.runner.verdict.baseline import ExpectedFailures, apply_baseline
from palace_conformance.standins import scripted as standins


def sample() -> RunResult:
    failing = CheckRecord("stdio.x.y", "stdio", "/steps/3/expect/error/kind", "fail",
                          "expected error kind 'timeout', got 'exception'", step="stalled",
                          covers=("STDIO-01",), expected="timeout", got="exception")
    return RunResult(host=HostInfo(argv=["host"], protocol=1, impl="h", capabilities=("stdio",)),
                     started_at="2026-08-02T10:00:00+00:00", duration_ms=1234.5, results=[
        ScenarioResult("stdio.x.y", "stdio", "failed", covers=("STDIO-01",),
                       checks=[failing], reason="/steps/3: ...",
                       steps=[StepRecord(3, "stalled", "call_tool", ran=True, ok=False,
                                         error={"kind": "exception"}, journal_start=2,
                                         journal_end=5)]),
        ScenarioResult("wake.a.b", "stdio", "not_applicable", reason="Not applicable: wakeup"),
        ScenarioResult("life.a.b", "http", "passed"),
    ])


def test_the_result_model_round_trips_through_json() -> None:
    run = sample()
    data = json.loads(json.dumps(run.to_json()))
    assert data["ok"] is False and data["counts"]["failed"] == 1
    assert data["results"][0]["checks"][0]["id"] == "stdio.x.y[stdio]/steps/3/expect/error/kind"
    again = RunResult.from_json(data)
    assert again.to_json() == run.to_json()
    assert again.results[0].steps[0].journal_end == 5


def test_junit_has_a_case_per_result_with_failures_and_skips() -> None:
    suite = to_xml(sample()).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    names = [c.get("name") for c in suite.iter("testcase")]
    assert names == ["stdio.x.y[stdio]", "wake.a.b[stdio]", "life.a.b[http]"]
    failure = suite.find("testcase/failure")
    assert failure is not None and "got 'exception'" in (failure.text or "")
    ET.fromstring(ET.tostring(suite))  # well-formed


def test_a_baseline_turns_a_known_failure_green_and_a_fixed_one_red() -> None:
    run = apply_baseline(sample(), ExpectedFailures(["stdio.x.y[stdio]"], reason="bug 12"))
    assert run.ok and run.results[0].baseline is not None
    assert run.counts()["known_failure"] == 1 and run.counts()["failed"] == 0
    stale = apply_baseline(sample(), ExpectedFailures(["life.a.b"]))
    assert not stale.ok and stale.stale_baseline == [
        "life.a.b: passes now; remove it from the baseline"]
    assert apply_baseline(sample(), None).exit_code == 1


def test_the_cli_stand_in_journals_helper_run_then_acts_like_the_fake_cli(
        tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    standins.install(tmp_path / "bin", {"journal": str(journal), "feed": {}})
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(tmp_path / "bin" / "mempalace"), "repair"], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "only --version, mine" in done.stderr
    helper, cli = read_journal(journal)
    assert helper["kind"] == "helper_run" and helper["name"] == "mempalace"
    assert helper["argv"][1:] == ["repair"] and helper["argv"][0].endswith("/bin/mempalace")
    assert cli["kind"] == "cli_run" and cli["command"] == "repair"

def test_a_run_that_judged_nothing_is_never_green() -> None:
    from palace_conformance.runner.reports.console import _totals

    def run(*statuses: tuple[str, str, str]) -> RunResult:
        return RunResult(results=[ScenarioResult(sid, "stdio", status, reason=reason,
                                                 subject="fake" if sid.startswith("fake.") else
                                                 "bridge")
                                  for sid, status, reason in statuses])

    na = "not_applicable"
    nothing = run(("a.b.c", na, "Not applicable: the host does not declare http"),
                  ("a.b.d", na, "Not applicable: the host does not declare http"),
                  ("a.b.e", na, "Not applicable: it checks the seed's conventions only"),
                  ("fake.x.y", "passed", ""))
    assert nothing.nothing_judged and not nothing.ok and nothing.exit_code == 1
    line = _totals(nothing).splitlines()[0]
    assert line == ("nothing judged: no result of the bridge passed or failed; by reason: "
                    "2 not applicable: the host does not declare http; 1 not applicable: it "
                    "checks the seed's conventions only")
    assert _totals(nothing).splitlines()[1].startswith("FAILED: ")
    one = run(("a.b.c", na, "Not applicable: x"), ("a.b.d", "passed", ""))
    assert not one.nothing_judged and one.ok
    fake_only = run(("fake.x.y", "passed", ""))  # the fake's self-tests: no bridge to judge
    assert not fake_only.nothing_judged and fake_only.ok
    untestable = run(("a.b.c", "not_testable", "Not testable: the host did not start"))
    assert untestable.nothing_judged and "1 Not testable: the host did not start" in \
        _totals(untestable)
