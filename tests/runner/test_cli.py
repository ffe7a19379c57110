"""``palace-conformance run``: exit codes, reports, and one-line errors without tracebacks."""

from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from palace_conformance.cli import main
from palace_conformance.scenarios.loader import scenarios_dir

from .support import MUTANT, scripted

LIFE = str(scenarios_dir() / "life")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["run", *args])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def scenario_file(sid: str) -> str:
    return str(scenarios_dir() / sid.split(".", 1)[0] / f"{sid}.json")


def test_a_green_run_exits_0_and_writes_json_and_junit(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = cli(capsys, scenario_file("life.transport.default-stdio-child"),
                         "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "j.xml"),
                         "--report-dir", str(tmp_path / "report"))
    assert code == 0, out + err
    assert "PASS" in out and out.rstrip().splitlines()[-1].startswith("OK: 1 scenario, ")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["ok"] is True and data["host"]["impl"] == "palace-conformance-python-host"
    [result] = data["results"]
    assert (result["scenario"], result["transport"], result["status"]) == (
        "life.transport.default-stdio-child", "stdio", "passed")
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("1", "0")
    report = tmp_path / "report"
    assert (report / "results.json").exists() and (report / "junit.xml").exists()
    assert (report / "runs" / "life.transport.default-stdio-child" / "stdio"
            / "journal.jsonl").exists()


def test_a_failing_bridge_exits_1_naming_the_failed_checks(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bridge = shlex.join([*MUTANT, "errors-as-exception"])
    code, out, _ = cli(capsys, scenario_file("tool.errors.rpc-errors-and-results-kept"),
                       "--bridge", bridge, "--transport", "stdio",
                       "--junit", str(tmp_path / "j.xml"))
    assert code == 1
    assert "/steps/3/expect/error/kind step unknown-param: expected error kind 'tool_error', " \
           "got 'exception'" in out
    assert out.rstrip().splitlines()[-1].startswith("FAILED: 1 scenario, ")
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure is not None and "/steps/4/expect/error/code" in (failure.text or "")


def test_only_inapplicable_scenarios_judge_nothing_and_exit_1(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A green gate that judged nothing would hide a bridge the profile ruled out (issue 26)."""
    code, out, _ = cli(capsys, scenario_file("wake.fresh-session.inject-once"),
                       "--bridge", shlex.join(scripted("good", "stdio,http")))
    assert code == 1
    assert "N/A" in out and "3 not applicable" in out
    assert "nothing judged: no result of the bridge passed or failed; by reason: 2 not " \
           "applicable: the host does not declare wakeup; 1 not applicable: parity" in out


@pytest.mark.parametrize(("args", "expected"), [
    (("--jobs", "0"), "palace-conformance run: --jobs 0: give 1 or more"),
    (("--bridge", "/nonexistent/palace-host"), "bridge command '/nonexistent/palace-host' not "
                                               "found or not executable"),
    (("--bridge", "no-such-palace-host-xyz --flag"), "bridge command 'no-such-palace-host-xyz'"),
    ((LIFE, "--select", "nomatch.*"), "no scenario id matches --select nomatch.*"),
    (("--transport", "pigeon"), "argument --transport: invalid choice: 'pigeon'"),
    (("--baseline", "base.yml"), "--baseline base.yml: no such file (write one with "
                                 "'palace-conformance baseline update"),
    (("--json", "/nonexistent/dir/r.json"), "--json /nonexistent/dir/r.json: directory "
                                            "/nonexistent/dir does not exist"),
    ((LIFE, "--bridge", shlex.join(scripted("crash:hello"))),
     "the bridge host failed: host exited during 'hello' (exit code 3): scripted host: "
     "crashing on hello"),
    ((LIFE, "--bridge", shlex.join(scripted("version:2"))),
     "the bridge host failed: host speaks driver protocol 2; this palace-conformance speaks 1"),
])
def test_usage_problems_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                args: tuple[str, ...], expected: str) -> None:
    code, _, err = cli(capsys, *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], err
    assert "Traceback" not in err


def test_broken_scenario_files_are_listed_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    broken = tmp_path / "life.bad.json"
    broken.write_text("{not json")
    code, _, err = cli(capsys, str(broken))
    assert code == 2 and "malformed JSON" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith("problem(s) in the scenario files "
                                                 "(palace-conformance fixtures validate)")


def test_the_cli_module_runs_with_python_dash_m() -> None:
    """`python -m palace_conformance.cli` is how scripts without the entry point call it."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "palace_conformance.cli", "--version"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("palace-conformance "), done.stdout
