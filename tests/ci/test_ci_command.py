"""``palace-conformance ci`` with the GitHub variables simulated: the step summary, annotations,
outputs, JUnit and report directory it writes, for a failing bridge, a passing one and an input
to fix."""

from __future__ import annotations

import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from .support import CHECKOUT, KIT, Runner, run

MUTANT = shlex.join([sys.executable, str(CHECKOUT / "tests" / "runner" / "mutant_host.py"),
                     "errors-as-exception"])
FAILING = "tool.errors.rpc-errors-and-results-kept"  # fails under errors-as-exception
PASSING = "wake.fresh-session.inject-once"


def test_a_failing_bridge_gets_annotations_summary_outputs_junit_and_a_report(
        tmp_path: Path) -> None:
    gh = Runner(tmp_path)
    # the checkout is the workspace here (as in this kit's own CI), so the scenario file is in it
    done = run([str(KIT), "ci", "--bridge", MUTANT, "--select", f"{FAILING} {PASSING}",
                "--transport", "stdio", "--level", "", "--baseline", "", "--shard", ""],
               gh.env(workspace=CHECKOUT), cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert errors, done.stdout[-2000:]
    for line in errors:
        assert line.startswith(f"::error file=fixtures/scenarios/tool/{FAILING}.json,title="
                               f"{FAILING} [stdio] /steps/")
        assert "(TOOL-03%2C TOOL-04)::" in line
    assert any("expected error kind 'tool_error', got 'exception'" in line for line in errors)
    report = gh.temp / "palace-conformance-report"
    outputs = gh.outputs()
    assert outputs["report-dir"] == str(report)
    assert outputs["exit-code"] == "1" and outputs["failed"] == "1"
    assert outputs["junit"] == str(report / "junit.xml")
    assert outputs["artifact-name"] == "palace-conformance-report"
    summary = gh.summary.read_text()
    assert summary.startswith("## ❌ palace-conformance: 1 failing result")
    assert f"| `{FAILING}` | stdio | `/steps/3/expect/error/kind`" in summary
    suite = ET.parse(report / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    assert (report / "results.json").is_file()
    assert (report / "bundles" / f"{FAILING}--stdio").is_dir()


def test_a_passing_run_with_blank_inputs_writes_a_green_summary_and_no_annotation(
        tmp_path: Path) -> None:
    gh = Runner(tmp_path)
    done = run([str(KIT), "ci", "--bridge", "", "--profile", "", "--select", PASSING,
                "--transport", "both", "--jobs", "", "--report-dir", ""],
               gh.env(), cwd=gh.workspace)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "::error" not in done.stdout
    assert gh.summary.read_text().startswith("## ✅ palace-conformance: passed")
    outputs = gh.outputs()
    assert outputs["exit-code"] == "0" and outputs["failed"] == "0"
    assert int(outputs["passed"]) >= 2  # both transports


def test_an_input_to_fix_fails_with_its_message_a_summary_and_exit_code_2(
        tmp_path: Path) -> None:
    gh = Runner(tmp_path)
    done = run([str(KIT), "ci", "--bridge", "no-such-bridge-program", "--select", PASSING],
               gh.env(), cwd=gh.workspace)
    assert done.returncode == 2
    assert "no-such-bridge-program" in done.stderr
    assert "::error title=palace-conformance::palace-conformance did not run (exit 2)" \
        in done.stdout
    assert "did not run (exit 2)" in gh.summary.read_text()
    assert gh.outputs()["exit-code"] == "2"


def test_prepare_names_the_hosts_cache_and_whether_the_bridge_needs_it(tmp_path: Path) -> None:
    gh = Runner(tmp_path)
    env = gh.env(PALACE_CONFORMANCE_NODE_HOME=str(tmp_path / "hosts"))
    done = run([str(KIT), "ci", "--prepare", "--bridge", "pi-extension:ext.ts", "--shard", "2/3"],
               env, cwd=gh.workspace)
    assert done.returncode == 0, done.stderr
    outputs = gh.outputs()
    assert outputs["node-hosts"] == "true"
    assert outputs["hosts-path"] == str((tmp_path / "hosts").resolve())
    assert outputs["hosts-key"].startswith("palace-conformance-node-hosts-")
    assert outputs["artifact-name"] == "palace-conformance-report-shard-2-of-3"
    assert outputs["report-dir"] == str(gh.temp / "palace-conformance-report")
    gh.output.unlink()
    done = run([str(KIT), "ci", "--prepare"], env, cwd=gh.workspace)
    assert gh.outputs()["node-hosts"] == "false"  # the reference needs no Node
    assert not (tmp_path / "hosts").exists()  # preparing installs nothing
