"""The official suite's results read, masked, compared and judged; the adapter (no Node)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palace_conformance.official import adapter
from palace_conformance.official.baseline import BaselineError, load_baseline
from palace_conformance.official.results import (
    ScenarioResult,
    compare,
    load_results,
    mask,
    scenario_name,
)


def check(status: str, **extra: object) -> dict[str, object]:
    return {"id": "c", "name": "C", "status": status, "timestamp": "2026-12-02T00:41:15.626Z",
            **extra}


def write(out: Path, directory: str, checks: list[dict[str, object]]) -> None:
    (out / directory).mkdir(parents=True)
    (out / directory / "checks.json").write_text(json.dumps(checks))


@pytest.mark.parametrize(("statuses", "verdict"), [
    (["SUCCESS", "INFO"], "PASS"), ([], "PASS"), (["SUCCESS", "WARNING"], "WARN"),
    (["WARNING", "FAILURE", "SUCCESS"], "FAIL")])
def test_the_verdict_is_the_worst_status(statuses, verdict):
    assert ScenarioResult("s", [check(s) for s in statuses]).verdict == verdict


def test_scenario_names_drop_the_time_and_the_server_prefix(tmp_path):
    assert scenario_name("server-tools-list-2026-12-02T00-42-41-499Z", "server") == "tools-list"
    assert scenario_name("server-server-sse-polling-2026-12-02T00-42-41Z",
                         "server") == "server-sse-polling"
    assert scenario_name("sse-retry-2026-12-02T00-41-15-626Z", "client") == "sse-retry"
    write(tmp_path, "server-ping-2026-12-02T00-42-40-403Z", [check("SUCCESS")])
    write(tmp_path, "auth/metadata-default-2026-12-02T00-42-40-403Z", [check("FAILURE")])
    found = load_results(tmp_path, "server")
    assert sorted(found) == ["auth/metadata-default", "ping"]
    assert found["auth/metadata-default"].verdict == "FAIL"


def test_an_unreadable_checks_file_is_one_clear_error(tmp_path):
    (tmp_path / "ping-2026-12-02T00-42-40Z").mkdir()
    (tmp_path / "ping-2026-12-02T00-42-40Z" / "checks.json").write_text("{not json")
    with pytest.raises(ValueError, match="re-run the suite"):
        load_results(tmp_path, "client")


def test_masking_hides_per_run_values_and_keeps_the_rest():
    record = {"timestamp": "2026-12-02T00:41:15.626Z", "details": {
        "headers": {"date": "Wed, 02 Dec 2026 00:41:15 GMT", "host": "localhost:41234"},
        "url": "http://127.0.0.1:5555/mcp", "session": "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9",
        "id": "0123456789abcdef0123456789abcdef", "durationMs": 17, "tools": 47,
        "text": "Unknown tool: test_simple_text"}}
    masked = mask(record)
    assert masked["timestamp"] == "<timestamp>"
    details = masked["details"]
    assert details["headers"] == {"date": "<date>", "host": "localhost:<port>"}
    assert details["url"] == "http://127.0.0.1:<port>/mcp"
    assert (details["session"], details["id"], details["durationMs"]) == (
        "<uuid>", "<hex-id>", "<durationMs>")
    assert details["tools"] == 47 and details["text"] == "Unknown tool: test_simple_text"


def test_two_runs_that_differ_only_in_per_run_values_are_identical():
    left = {"ping": ScenarioResult("ping", [check("SUCCESS", details={"port": 1})])}
    right = {"ping": ScenarioResult("ping", [{**check("SUCCESS", details={"port": 2}),
                                              "timestamp": "2027-01-01T00:00:00.000Z"}])}
    assert compare(left, right) == []


def test_every_kind_of_difference_is_named():
    left = {"ping": ScenarioResult("ping", [check("SUCCESS", details={"tools": 47})]),
            "only-left": ScenarioResult("only-left", [])}
    right = {"ping": ScenarioResult("ping", [check("FAILURE", details={"tools": 46})]),
             "only-right": ScenarioResult("only-right", [])}
    lines = compare(left, right, ("fake", "real"))
    assert "only-left: only in fake" in lines and "only-right: only in real" in lines
    assert "ping: verdict PASS on fake, FAIL on real" in lines
    assert any(line.startswith("ping: check 0 (c) differs: /details/tools: fake 47, real 46")
               for line in lines)


def test_the_shipped_baseline_has_a_reason_for_every_entry_and_judges_both_ways():
    baseline = load_baseline()
    entry = baseline.expected("server", "resources-read-text")
    assert entry is not None and entry.verdict == "FAIL" and "resources" in entry.reason
    assert baseline.expected("server", "tools-list") is None
    assert baseline.expected("client", "auth/resource-mismatch").verdict == "PASS"  # exact wins
    assert baseline.expected("client", "auth/scope-step-up").verdict == "FAIL"
    results = {"tools-list": ScenarioResult("tools-list", [check("FAILURE")]),
               "prompts-list": ScenarioResult("prompts-list", [check("SUCCESS")]),
               "ping": ScenarioResult("ping", [check("SUCCESS")])}
    assert baseline.judge("server", results) == [
        "prompts-list: PASS, expected FAIL (stale baseline entry)",
        "tools-list: FAIL, expected PASS (unexpected)"]


@pytest.mark.parametrize(("text", "needle"), [
    ("server: [1, 2]", "must map scenario names"),
    ("server:\n  ping: {verdict: FAIL}\n", "exactly 'verdict' and 'reason'"),
    ("server:\n  ping: {verdict: BAD, reason: x}\n", "verdict must be one of"),
    ("server:\n  ping: {verdict: FAIL, reason: ''}\n", "give the reason"),
    ("servers: {}\n", "only the keys"),
    ("server: [\n", "is not YAML"),
])
def test_a_bad_baseline_is_one_line_naming_the_fix(tmp_path, text, needle):
    path = tmp_path / "baseline.yaml"
    path.write_text(text)
    with pytest.raises(BaselineError, match=needle.replace("[", r"\[")) as caught:
        load_baseline(path)
    assert "\n" not in str(caught.value)


def test_the_adapter_calls_the_tool_each_scenario_checks_and_lists_otherwise():
    assert adapter.bridge_argv("tools_call") == ["call", "add_numbers", '{"a": 5, "b": 3}']
    assert adapter.bridge_argv("sse-retry") == ["call", "test_reconnection", "{}"]
    assert adapter.bridge_argv("initialize") == ["tools"]
    env = adapter.bridge_env("http://localhost:1/mcp", {
        "PATH": "/bin", "MEMPALACE_REMOTE_TOKEN": "secret", "MEMPALACE_REMOTE_URL": "http://x"})
    assert env["MEMPALACE_REMOTE_URL"] == "http://localhost:1/mcp" and env["PATH"] == "/bin"
    assert "MEMPALACE_REMOTE_TOKEN" not in env
    assert int(env["MEMPALACE_MCP_TIMEOUT_MS"]) < 30_000, "under the suite's own timeout"


def test_the_adapter_without_a_url_is_a_usage_error(capsys):
    assert adapter.main([]) == 2
    assert "last argument" in capsys.readouterr().err
