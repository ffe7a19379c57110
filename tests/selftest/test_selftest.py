"""The selftest end to end: real mutant hosts are killed, a harmless patch survives (exit 1).

Mutants run through the real runner (world, fake, driver protocol) on a few scenario files
loaded on their own, so these stay quick; the whole catalogue is `palace-conformance selftest`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from palace_conformance.cli import main
from palace_conformance.hosts import REFERENCE_HOST
from palace_conformance.runner.results import CheckRecord, ScenarioResult
from palace_conformance.scenarios.loader import load_scenario, scenarios_dir
from palace_conformance.selftest.engine import (
    KILLED,
    MUTANT_HOST_MODULE,
    SURVIVED,
    MutantOutcome,
    SelftestOptions,
    SelftestResult,
    run_selftest,
    to_markdown,
)
from palace_conformance.selftest.mutants import find


def shipped(*ids: str) -> list:
    return [load_scenario(scenarios_dir() / sid.split(".", 1)[0] / f"{sid}.json") for sid in ids]


def selftest(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["selftest", *args])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_two_mutants_run_through_the_real_runner_and_are_killed(tmp_path: Path) -> None:
    mutants = [find("stdio-zero-respawns-not-latched"), find("mail-claimed-closes")]
    scenarios = shipped("stdio.respawn.zero-latches", "mail.owed.seq-status-and-correlation-rules",
                        "wake.resumed-session.no-injection")  # the last covers neither
    seen: list[str] = []
    result = run_selftest(mutants, scenarios, SelftestOptions(jobs=4, work_root=tmp_path),
                          report=lambda label, outcome, sanity: seen.append(label))
    assert sorted(seen) == sorted(["stdio-zero-respawns-not-latched", "mail-claimed-closes",
                                   "sanity"])
    assert result.ok and result.exit_code == 0, [o.why_survived for o in result.survivors]
    latch, claimed = result.outcomes
    assert [(k.scenario, k.transport, k.pointer) for k in latch.kills] == [
        ("stdio.respawn.zero-latches", "stdio", "/steps/4/expect/ok")]
    assert "expected ok false, got true" in latch.kills[0].message  # the mutant respawned
    [kill] = claimed.kills
    assert (kill.scenario, kill.transport) == ("mail.owed.seq-status-and-correlation-rules",
                                               "http")
    assert [(r.scenario, r.transport, r.status) for r in result.sanity] == [
        ("stdio.respawn.zero-latches", "stdio", "passed"),
        ("mail.owed.seq-status-and-correlation-rules", "http", "passed")]
    data = json.loads(json.dumps(result.to_json()))
    assert data["ok"] is True and data["counts"] == {"mutants": 2, "killed": 2, "survived": 0,
                                                     "runs": 4, "sanity_runs": 2}
    assert data["mutants"][0]["kills"][0]["check"] == (
        "stdio.respawn.zero-latches[stdio]/steps/4/expect/ok")
    assert "| `mail-claimed-closes`" in to_markdown(result)


def test_a_harmless_patch_survives_and_the_selftest_exits_1(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = selftest(capsys, "--mutant", "control-noop", "--json",
                              str(tmp_path / "kill.json"), "--markdown", str(tmp_path / "kill.md"))
    assert code == 1, out + err
    assert ("SURVIVED: control-noop breaks STDIO-07 (a real patch that changes nothing: it must "
            "survive): 3 of 3 run(s) passed") in out
    assert out.rstrip().splitlines()[-1].startswith("FAILED: 0/1 mutant(s) killed; the "
                                                    "unmutated reference passed all 3")
    data = json.loads((tmp_path / "kill.json").read_text())
    [mutant] = data["mutants"]
    assert (mutant["name"], mutant["status"], mutant["kills"]) == ("control-noop", SURVIVED, [])
    assert {run["scenario"] for run in mutant["runs"]} == {  # every STDIO-07 scenario
        "stdio.respawn.budget-resets-on-success", "stdio.respawn.handshake-resets-budget",
        "stdio.respawn.initialize-answer-alone-keeps-budget"}
    assert {run["status"] for run in mutant["runs"]} == {"passed"}
    assert "| SURVIVED |" in (tmp_path / "kill.md").read_text()


def _result(status: str, transport: str = "stdio", pointer: str = "/steps/1/expect/ok"
            ) -> ScenarioResult:
    checks = ([CheckRecord("s.a.b", transport, pointer, "fail", "expected ok true, got false")]
              if status == "failed" else [])
    return ScenarioResult("s.a.b", transport, status, checks=checks)  # type: ignore[arg-type]


def test_a_failure_that_also_fails_unmutated_is_not_a_kill() -> None:
    mutant = find("wake-on-resume")
    proven = MutantOutcome(mutant, [_result("failed")], sanity={"s.a.b[stdio]": "passed"})
    broken = MutantOutcome(mutant, [_result("failed")], sanity={"s.a.b[stdio]": "failed"})
    untestable = MutantOutcome(mutant, [_result("not_testable")],
                               sanity={"s.a.b[stdio]": "passed"})
    assert proven.status == KILLED and [k.pointer for k in proven.kills] == ["/steps/1/expect/ok"]
    assert broken.status == SURVIVED and broken.kills == []
    assert broken.why_survived == "0 of 1 run(s) passed, 1 failed but fail unmutated too"
    assert untestable.status == SURVIVED
    assert "not testable" in untestable.why_survived
    run = SelftestResult(outcomes=[proven], sanity=[_result("failed")])
    assert not run.ok and run.exit_code == 1  # a red sanity run fails the selftest as well
    assert SelftestResult(outcomes=[proven], sanity=[_result("passed")]).ok


def test_first_kill_skips_the_rest_and_checks_only_the_killing_runs(tmp_path: Path) -> None:
    scenarios = shipped("wake.resumed-session.no-injection", "wake.reloaded-session.no-injection")
    result = run_selftest([find("wake-on-resume")], scenarios,
                          SelftestOptions(jobs=1, first_kill=True, work_root=tmp_path))
    [outcome] = result.outcomes
    assert outcome.status == KILLED and outcome.selected == 2 and outcome.skipped == 1
    assert [(r.scenario, r.status) for r in result.sanity] == [
        ("wake.resumed-session.no-injection", "passed")]
    assert result.to_json()["first_kill"] is True


def test_usage_mistakes_are_one_line_with_exit_2(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    code, out, err = selftest(capsys, "--mutant", "no-such-mutant")
    assert (code, out) == (2, "")
    assert err.strip() == ("palace-conformance selftest: no mutant named 'no-such-mutant' (see "
                           "palace-conformance selftest --list)")
    code, _, err = selftest(capsys, "--jobs", "0")
    assert code == 2 and err.strip().endswith("--jobs 0: give 1 or more")
    code, _, err = selftest(capsys, "--json", str(tmp_path / "missing" / "x.json"))
    assert code == 2 and "(create it first)" in err and len(err.strip().splitlines()) == 1


def test_the_command_defaults_match_the_engine() -> None:
    from palace_conformance.commands import selftest as selftest_command
    from palace_conformance.runner.execution import execute
    from palace_conformance.runner.jobs import default_jobs
    from palace_conformance.selftest import engine as selftest

    assert selftest.SelftestOptions().jobs == default_jobs()
    parser = argparse.ArgumentParser()
    selftest_command.add_commands(parser.add_subparsers())
    args = parser.parse_args(["selftest"])
    engine_default = execute.RunOptions(host_argv=()).op_timeout_ms
    assert args.op_timeout_ms == engine_default == selftest.SelftestOptions().op_timeout_ms


def test_list_names_every_mutant_and_the_control(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = selftest(capsys, "--list")
    assert code == 0
    assert any(line.startswith("stdio-respawn-unbounded ") and "STDIO-06" in line
               for line in out.splitlines())
    assert "control-noop" in out and "(control: must survive)" in out


def _hello(*args: str) -> subprocess.CompletedProcess[str]:
    host = [*REFERENCE_HOST[:-1], MUTANT_HOST_MODULE]  # the selftest's host around the reference's
    return subprocess.run([*host, *args], input='{"id": 1, "op": "hello"}\n',
                          capture_output=True, text=True, timeout=30, check=False)


def test_the_selftest_host_applies_a_mutant_and_says_so_in_hello() -> None:
    done = _hello("--mutant", "wake-on-resume")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["bridge"].endswith("[mutant wake-on-resume]")
    plain = _hello()
    assert "mutant" not in json.loads(plain.stdout)["result"]["bridge"]
    wrong = _hello("--mutant", "nope")
    assert wrong.returncode == 1 and wrong.stdout == ""
    assert wrong.stderr.strip() == ("palace-conformance-python-host: no mutant named 'nope' (see "
                                    "palace-conformance selftest --list)")
    assert sys.executable  # the host ran under this interpreter
