"""Check verdicts' wording, the real catalogue, secrets; the cases every runner must reproduce
are data in fixtures/runner-tests/ (tests/runner/test_runner_tests.py runs them)."""

from __future__ import annotations

from typing import Any

from palace_conformance.resources import tool_catalogue
from palace_conformance.scenarios.checks import evaluate, evaluate_tools, leaked_secrets
from palace_conformance.scenarios.model import Check, ToolsExpect


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


def test_verdicts_say_why() -> None:
    """Pass or fail is data (fixtures/runner-tests/checks.json); the words are this judge's."""
    swapped = check(check="sequence",
                    items=[{"method": "tools/list"}, {"method": "notifications/initialized"}])
    detail = evaluate(swapped, JOURNAL).detail
    assert "item 2 of 2" in detail
    # the record that matches but sits before the earlier item is named as such, and is never
    # the "closest miss" (which then comes from the records after the earlier items)
    assert "record #3 matches it but comes before them" in detail, detail
    assert "(closest miss: at /method: " in detail, detail
    last = check(check="sequence", items=[{"pid": 11, "tool": "mempalace_search"},
                                          {"method": "initialize"}])
    assert evaluate(last, JOURNAL).detail.endswith("(no records after them)")
    for bounds in ({"equals": 2}, {"equals": 1}, {"at_least": 3}, {"at_most": 2},
                   {"at_least": 1, "at_most": 1}):
        counted = evaluate(check(check="count", match={"method": "initialize"}, **bounds), JOURNAL)
        assert "2 matching" in counted.detail
    exited = evaluate(check(check="absent", match={"kind": "process_exit"}), JOURNAL)
    assert "record #6" in exited.detail
    respawn = {"from": {"kind": "process_exit"}, "to": {"kind": "process_start"}}
    second = check(check="gap", **respawn, from_nth=2, ms={"at_least": 0})
    assert "only 1 record" in evaluate(second, JOURNAL).detail
    untimed = evaluate(check(check="gap", **{"from": {"kind": "a"}}, to={"kind": "b"},
                             ms={"at_least": 0}), [{"kind": "a"}, {"kind": "b"}])
    assert "timestamp" in untimed.detail
    spawned = [rec("process_exit", 1.0), rec("process_start", 2.5, created_t=1.4)]
    assert evaluate(check(check="gap", **respawn, ms={"at_least": 0}),
                    spawned).detail.startswith("400 ms from record #0 to #1's creation")


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


def test_leaked_secrets() -> None:
    assert leaked_secrets(["tok-1", "tok-2"], ['{"auth": "Bearer tok-2"}', "fine"]) == ["tok-2"]
    assert leaked_secrets(["tok-1"], ["Bearer <redacted>"]) == []
