"""Check semantics over record streams, and the tools/processes/secrets verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from palace_conformance.resources import tool_catalogue
from palace_conformance.scenarios.checks import (
    evaluate,
    evaluate_processes,
    evaluate_tools,
    leaked_secrets,
    process_facts,
    resolve_pointer,
)
from palace_conformance.scenarios.matching import MISSING
from palace_conformance.scenarios.model import Check, ProcessesExpect, ToolsExpect


def rec(kind: str, t: float, pid: int = 10, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "t": t, "pid": pid, "transport": "stdio", **fields}


JOURNAL = [
    rec("process_start", 0.000),
    rec("recv", 0.010, method="initialize"),
    rec("send", 0.011, message={"result": {"serverInfo": {"name": "mempalace"}}}),
    rec("recv", 0.020, method="notifications/initialized"),
    rec("recv", 0.030, method="tools/list"),
    rec("recv", 0.040, method="tools/call", tool="mempalace_search"),
    rec("process_exit", 0.050, code=1),
    rec("process_start", 0.450, pid=11),
    rec("recv", 0.460, pid=11, method="initialize"),
    rec("recv", 0.470, pid=11, method="tools/call", tool="mempalace_search"),
]


def check(**raw: Any) -> Check:
    return Check.from_json(raw)


def test_sequence_is_an_ordered_subsequence() -> None:
    good = check(check="sequence", items=[{"method": "initialize"}, {"tool": "mempalace_search"},
                                          {"kind": "process_start"}, {"method": "initialize"}])
    assert evaluate(good, JOURNAL).passed
    swapped = check(check="sequence",
                    items=[{"method": "tools/list"}, {"method": "notifications/initialized"}])
    verdict = evaluate(swapped, JOURNAL)
    assert not verdict.passed and "item 2 of 2" in verdict.detail


def test_sequence_needs_distinct_records_for_repeated_items() -> None:
    twice = check(check="sequence", items=[{"method": "tools/list"}, {"method": "tools/list"}])
    assert not evaluate(twice, JOURNAL).passed


@pytest.mark.parametrize(("bounds", "passed"), [
    ({"equals": 2}, True), ({"equals": 1}, False), ({"at_least": 3}, False),
    ({"at_most": 2}, True), ({"at_least": 1, "at_most": 1}, False),
])
def test_count_bounds(bounds: dict[str, int], passed: bool) -> None:
    verdict = evaluate(check(check="count", match={"method": "initialize"}, **bounds), JOURNAL)
    assert verdict.passed is passed
    assert "2 matching" in verdict.detail


def test_absent_names_the_offending_record() -> None:
    verdict = evaluate(check(check="absent", match={"kind": "process_exit"}), JOURNAL)
    assert not verdict.passed and "record #6" in verdict.detail
    assert evaluate(check(check="absent", match={"kind": "signal"}), JOURNAL).passed


def test_order_first_and_last() -> None:
    after_first = check(check="order", first={"method": "initialize"},
                        then={"method": "tools/call"})
    assert evaluate(after_first, JOURNAL).passed
    after_last = check(check="order", first={"method": "initialize"}, then={"method": "tools/call"},
                       after="last")
    assert not evaluate(after_last, JOURNAL).passed  # the first search precedes the 2nd initialize
    backwards = check(check="order", first={"method": "tools/list"}, then={"method": "initialize"})
    assert not evaluate(backwards, JOURNAL).passed


def test_order_cannot_pass_on_an_empty_run() -> None:
    nothing = check(check="order", first={"method": "initialize"}, then={"method": "ping"})
    assert not evaluate(nothing, JOURNAL).passed
    optional = check(check="order", first={"method": "initialize"}, then={"method": "ping"},
                     then_required=False)
    assert evaluate(optional, JOURNAL).passed
    no_first = check(check="order", first={"method": "ping"}, then={"method": "initialize"})
    assert not evaluate(no_first, JOURNAL).passed


def test_distinct_counts_values_at_a_pointer() -> None:
    two_pids = check(check="distinct", match={"kind": "process_start"}, field="/pid", equals=2)
    assert evaluate(two_pids, JOURNAL).passed
    same_pid = check(check="distinct", match={"method": "initialize"}, field="/pid", equals=1)
    assert not evaluate(same_pid, JOURNAL).passed


def test_gap_is_a_lower_bound_plus_slack() -> None:
    respawn = {"from": {"kind": "process_exit"}, "to": {"kind": "process_start"}}
    assert evaluate(check(check="gap", **respawn, ms={"at_least": 300}), JOURNAL).passed
    assert not evaluate(check(check="gap", **respawn, ms={"at_least": 500}), JOURNAL).passed
    assert not evaluate(check(check="gap", **respawn, ms={"at_least": 300, "slack_ms": 50}),
                        JOURNAL).passed
    second = check(check="gap", **respawn, from_nth=2, ms={"at_least": 0})
    assert "only 1 record" in evaluate(second, JOURNAL).detail


def test_gap_needs_timestamps() -> None:
    records = [{"kind": "a"}, {"kind": "b"}]
    verdict = evaluate(check(check="gap", **{"from": {"kind": "a"}}, to={"kind": "b"},
                             ms={"at_least": 0}), records)
    assert not verdict.passed and "timestamp" in verdict.detail


def test_resolve_pointer() -> None:
    doc = {"a/b": {"~x": [10, 20]}}
    assert resolve_pointer(doc, "/a~1b/~0x/1") == 20
    assert resolve_pointer(doc, "/a~1b/~0x/2") is MISSING
    assert resolve_pointer(doc, "") == doc


def test_tools_against_the_catalogue() -> None:
    catalogue = tool_catalogue()["tools"]
    registered = [{"name": t["name"], "parameters": t["inputSchema"]} for t in catalogue]
    expect = ToolsExpect(registered="catalogue", schemas="catalogue", order="catalogue")
    assert all(v.passed for v in evaluate_tools(expect, registered, catalogue))
    # a bridge that converts schemas loses constraints: caught
    lossy = [dict(t) for t in registered]
    search = next(t for t in lossy if t["name"] == "mempalace_search")
    search["parameters"] = {**search["parameters"], "properties": {
        **search["parameters"]["properties"], "limit": {"type": "number"}}}
    verdicts = evaluate_tools(expect, lossy, catalogue)
    assert [v.passed for v in verdicts] == [True, False, True]
    assert "mempalace_search" in verdicts[1].detail
    assert not evaluate_tools(expect, registered[:-1], catalogue)[0].passed
    assert not evaluate_tools(expect, list(reversed(registered)), catalogue)[-1].passed
    assert not evaluate_tools(ToolsExpect(registered="none"), registered, catalogue)[0].passed
    assert evaluate_tools(ToolsExpect(registered="none"), [], catalogue)[0].passed


def test_process_facts_infers_sigkill_from_a_silent_end() -> None:
    journal = [
        rec("process_start", 0, pid=1), rec("signal", 1, pid=1, signal="SIGTERM", action="ignored"),
        rec("process_start", 2, pid=2), rec("process_exit", 3, pid=2, code=0),
        {"kind": "process_start", "t": 0, "pid": 99, "transport": "http"},  # the runner's fake
    ]
    facts = process_facts(journal, alive=lambda pid: pid == 99)
    assert facts == {"spawned": 2, "signals": {"SIGTERM": 1, "SIGKILL": 1}, "alive": 0}
    expect = ProcessesExpect.from_json({"spawned": 2, "alive_after_shutdown": 0,
                                        "signals": {"SIGKILL": 1, "SIGTERM": {"at_least": 1}}})
    assert expect is not None and all(v.passed for v in evaluate_processes(expect, facts))
    orphan = process_facts(journal, alive=lambda pid: pid in (1, 99))
    assert not all(v.passed for v in evaluate_processes(expect, orphan))


def test_leaked_secrets() -> None:
    assert leaked_secrets(["tok-1", "tok-2"], ['{"auth": "Bearer tok-2"}', "fine"]) == ["tok-2"]
    assert leaked_secrets(["tok-1"], ["Bearer <redacted>"]) == []
