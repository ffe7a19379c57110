"""Broken hosts fail the scenarios that cover the broken behaviour: the checks can fail."""

from __future__ import annotations

from pathlib import Path

from palace_conformance.runner.execution.execute import run_scenario

from .support import failing, mutant, options, shipped


def test_a_bridge_that_does_not_kill_a_stalled_child_fails_the_stall_scenario(
        tmp_path: Path) -> None:
    result = run_scenario(shipped("stdio.timeout.stall-kills-child"), "stdio",
                          options(mutant("no-kill-on-timeout"), work_root=tmp_path))
    assert result.status == "failed"
    failed = failing(result)
    assert {"/expect/journal/0", "/expect/journal/1", "/expect/processes/signals/SIGTERM",
            "/expect/processes/alive_after_shutdown"} <= set(failed)
    assert "SIGTERM x0; expected at least 1" in failed["/expect/processes/signals/SIGTERM"]
    assert "/steps/3/expect/error/kind" not in failed  # the timeout itself still happened
    assert result.reason.startswith("/expect/journal/0: ")
    assert all(c.covers == ("STDIO-01", "STDIO-02") for c in result.checks)


def test_a_host_that_loses_error_kinds_fails_with_expected_versus_got(tmp_path: Path) -> None:
    result = run_scenario(shipped("tool.errors.rpc-errors-and-results-kept"), "stdio",
                          options(mutant("errors-as-exception"), work_root=tmp_path))
    failed = failing(result)
    assert result.status == "failed"
    assert failed["/steps/3/expect/error/kind"].startswith(
        "expected error kind 'tool_error', got 'exception'")
    assert failed["/steps/4/expect/error/code"] == "expected error code -32001, got None"
    assert "/steps/5/expect/result" not in failed  # the results that were right stay green
    record = next(c for c in result.checks if c.pointer == "/steps/3/expect/error/kind")
    assert (record.expected, record.got, record.step) == ("tool_error", "exception",
                                                          "unknown-param")
