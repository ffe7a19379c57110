"""Event-driven settles: a settle ends on the event its step waits for, never sooner, and a
window that has to show that nothing happens still runs its whole length.

Durations are only ever checked from below (a window is never shorter than its quiet period):
how much *sooner* a settle ends is machine load, so it is read from ``ended_by`` instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.execution.settle import (
    ENDED_BY_EXPECTATIONS,
    ENDED_BY_MAX,
    ENDED_BY_QUIET,
)
from palace_conformance.runner.execution.world import World
from palace_conformance.runner.results import ScenarioResult, StepRecord
from palace_conformance.runner.verdict.early_end import SettleCondition
from palace_conformance.scenarios.model import Step

from .support import options, shipped, write_scenario

TIMED = Path(__file__).resolve().parent / "timed_host.py"
START = [{"op": "load"}, {"op": "event", "name": "session_start", "payload": {"reason": "startup"}}]


def timed(log: Path, *host_options: str) -> tuple[str, ...]:
    return (sys.executable, str(TIMED), str(log), *host_options)


def settle_step(expect: dict[str, Any] | None, quiet_ms: int = 200,
                max_ms: int = 5000) -> Step:
    data: dict[str, Any] = {"op": "settle", "quiet_ms": quiet_ms, "max_ms": max_ms}
    if expect is not None:
        data["expect"] = expect
    return Step.from_json(2, data)


def run_settle(tmp_path: Path, sid: str, settle: dict[str, Any],
               *host_options: str) -> tuple[ScenarioResult, StepRecord, list[dict[str, Any]]]:
    """One scenario (load, session_start, ``settle``) on the timed host: the result, the settle's
    record and every request the host saw."""
    scenario = write_scenario(tmp_path, {"id": sid, "transports": ["stdio"],
                                         "steps": [*START, settle]})
    log = tmp_path / "requests.jsonl"
    result = run_scenario(scenario, "stdio", options(timed(log, *host_options),
                                                     work_root=tmp_path / "work"))
    [record] = [s for s in result.steps if s.op == "settle"]
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    return result, record, requests


def failing(result: ScenarioResult) -> list[str]:
    return [c.pointer for c in result.checks if c.status == "fail"]


# -- which settles may end early ---------------------------------------------------------------

@pytest.mark.parametrize("expect", [
    {"tools": {"registered": "catalogue"}},
    {"tools": {"registered": ["mempalace_status"], "schemas": "catalogue"}},
    {"tools": {"includes": ["mempalace_status"]}},
    {"journal": [{"check": "count", "match": {"kind": "recv"}, "at_least": 1}]},
    {"effects": [{"check": "sequence", "items": [{"kind": "notify"}, {"kind": "message"}]}]},
    {"journal": [{"check": "distinct", "match": {"kind": "recv"}, "field": "/pid",
                  "at_least": 2}], "ok": True},
    # a negative check for the other transport does not apply here
    {"tools": {"registered": "catalogue"},
     "journal": [{"check": "absent", "match": {"kind": "recv"}, "transport": "http"}]},
])
def test_a_settle_whose_expectations_are_all_positive_may_end_on_them(
        expect: dict[str, Any]) -> None:
    assert SettleCondition.for_step(settle_step(expect), "stdio") is not None


@pytest.mark.parametrize("expect", [
    None,
    {"ok": True},
    {"journal": [{"check": "absent", "match": {"kind": "recv"}}]},
    {"journal": [{"check": "count", "match": {"kind": "recv"}, "equals": 1}]},
    {"effects": [{"check": "count", "match": {"kind": "message"}, "at_most": 1}]},
    {"effects": [{"check": "count", "match": {"kind": "message"}, "at_least": 1,
                  "at_most": 2}]},
    {"journal": [{"check": "order", "first": {"kind": "recv"}, "then": {"kind": "send"}}]},
    {"journal": [{"check": "gap", "from": {"kind": "recv"}, "to": {"kind": "send"},
                  "ms": {"at_least": 100}}]},
    {"tools": {"registered": "none"}},
    {"tools": {"registered": "catalogue", "excludes": ["mempalace_status"]}},
    {"tools": {"schemas": "catalogue"}},
    {"tools": {"registered": "catalogue"}, "elapsed_ms": {"at_least": 100}},
    {"tools": {"registered": "catalogue"},
     "journal": [{"check": "count", "match": {"kind": "recv"}, "equals": 2}]},
])
def test_a_settle_that_must_show_an_absence_or_an_exact_count_keeps_its_window(
        expect: dict[str, Any] | None) -> None:
    assert SettleCondition.for_step(settle_step(expect), "stdio") is None


def test_the_condition_holds_only_when_every_expectation_does() -> None:
    condition = SettleCondition.for_step(settle_step({
        "effects": [{"check": "count", "match": {"kind": "notify"}, "at_least": 2}],
        "journal": [{"check": "sequence", "items": [{"kind": "recv"}, {"kind": "send"}]}],
        "tools": {"includes": ["a"]}}), "stdio")
    assert condition is not None
    notes = [{"kind": "notify"}, {"kind": "notify"}]
    journal = [{"kind": "recv"}, {"kind": "other"}, {"kind": "send"}]
    tools = [{"name": "a"}, {"name": "b"}]
    assert condition.met(notes, journal, tools)
    assert not condition.met(notes[:1], journal, tools)
    assert not condition.met(notes, journal[::-1], tools)
    assert not condition.met(notes, journal, [{"name": "b"}])
    assert not condition.met(notes, journal, None)  # the registry could not be listed


# -- how they wait -----------------------------------------------------------------------------

def test_a_settle_ends_when_the_tools_it_waits_for_are_registered(tmp_path: Path) -> None:
    result, record, requests = run_settle(
        tmp_path, "life.settle.tools-late",
        {"op": "settle", "quiet_ms": 3000, "max_ms": 10000,
         "expect": {"tools": {"registered": ["mempalace_status", "mempalace_search"]}}},
        "tools-after:300:mempalace_status,mempalace_search")
    assert result.status == "passed", failing(result)
    assert record.ended_by == ENDED_BY_EXPECTATIONS
    # not before they came: the registrations are this step's own effects
    assert [e["name"] for e in record.effects if e["kind"] == "tool_registered"] == [
        "mempalace_status", "mempalace_search"]
    settles = [r for r in requests if r["op"] == "settle"]
    assert settles[0]["quiet_ms"] == 0 and settles[0]["max_ms"] == 10000  # background first
    assert all(r["max_ms"] <= 25 for r in settles[1:])  # then short looks, not one long wait


def test_a_settle_ends_when_the_journal_record_it_waits_for_is_written(tmp_path: Path) -> None:
    result, record, _ = run_settle(
        tmp_path, "life.settle.journal-late",
        {"op": "settle", "quiet_ms": 3000, "max_ms": 10000,
         "expect": {"journal": [{"check": "count", "match": {"kind": "late_mark"},
                                 "at_least": 1}]}},
        "journal-after:300:late_mark")
    assert result.status == "passed", failing(result)
    assert record.ended_by == ENDED_BY_EXPECTATIONS
    marks = [r for r in result.journal[record.journal_start:record.journal_end]
             if r["kind"] == "late_mark"]
    assert len(marks) == 1  # not before it was written: inside the settle's own window


@pytest.mark.parametrize(("expect", "host_option"), [
    ({"journal": [{"check": "count", "match": {"kind": "early_mark"}, "at_least": 1}]},
     "journal-now:early_mark"),
    ({"effects": [{"check": "count", "match": {"kind": "notify"}, "at_least": 1}]},
     "notify-now"),
])
def test_what_the_settled_step_already_saw_ends_the_settle_on_its_expectations(
        tmp_path: Path, expect: dict[str, Any], host_option: str) -> None:
    """Work an event started can land before the event's step ends (a loaded machine decides):
    the settle's window covers the step it settles, for its early end as for the judge, so it
    neither waits out its quiet window nor counts 0."""
    result, record, _ = run_settle(
        tmp_path, "life.settle.landed-early",
        {"op": "settle", "quiet_ms": 3000, "max_ms": 10000, "expect": expect}, host_option)
    assert result.status == "passed", failing(result)
    assert record.ended_by == ENDED_BY_EXPECTATIONS
    [event] = [s for s in result.steps if s.op == "event"]
    landed = (result.journal[event.journal_start:event.journal_end]
              if "journal" in expect else event.effects)
    assert landed, "the host option must make the work land inside the event's own step"


def test_a_negative_settle_sends_one_request_and_runs_its_whole_quiet_window(
        tmp_path: Path) -> None:
    result, record, requests = run_settle(
        tmp_path, "life.settle.absent",
        {"op": "settle", "quiet_ms": 400, "max_ms": 5000,
         "expect": {"effects": [{"check": "absent", "match": {"kind": "message"}}]}},
        "notify-after:100", "quiet-from-call")
    assert result.status == "passed", failing(result)
    assert record.ended_by == ENDED_BY_QUIET and record.elapsed_ms >= 400  # type: ignore[operator]
    assert [e["kind"] for e in record.effects] == ["notify"]
    settles = [r for r in requests if r["op"] == "settle"]
    assert [(r["quiet_ms"], r["max_ms"]) for r in settles] == [(400, 5000)]


@pytest.mark.parametrize("host_options", [
    # the host counts quiet from its last effect (as the reference host): the host's quiet ends it
    ("notify-after:100",),
    # the host counts from each request (as the Node hosts), so short looks never see a quiet
    # period: the runner's own count ends it, no sooner than quiet_ms after the settle began
    ("notify-after:100", "quiet-from-call"),
])
def test_a_positive_expectation_that_never_holds_keeps_the_quiet_window(
        tmp_path: Path, host_options: tuple[str, ...]) -> None:
    result, record, _ = run_settle(
        tmp_path, "life.settle.never",
        {"op": "settle", "quiet_ms": 400, "max_ms": 5000,
         "expect": {"effects": [{"check": "count", "match": {"kind": "message"},
                                 "at_least": 1}]}},
        *host_options)
    assert failing(result) == ["/steps/2/expect/effects/0"]
    assert record.ended_by == ENDED_BY_QUIET
    assert [e["kind"] for e in record.effects] == ["notify"]
    if "quiet-from-call" in host_options:
        assert record.elapsed_ms is not None and record.elapsed_ms >= 400


def test_effects_that_keep_coming_hold_a_waiting_settle_open_until_max_ms(
        tmp_path: Path) -> None:
    result, record, _ = run_settle(
        tmp_path, "life.settle.busy",
        {"op": "settle", "quiet_ms": 1000, "max_ms": 1500,
         "expect": {"effects": [{"check": "count", "match": {"kind": "message"},
                                 "at_least": 1}]}},
        "notify-every:50")
    assert failing(result) == ["/steps/2/expect/effects/0"]
    assert record.ended_by == ENDED_BY_MAX and record.elapsed_ms >= 1500  # type: ignore[operator]
    assert sum(1 for e in record.effects if e["kind"] == "notify") >= 5


def test_the_reference_bridge_settles_on_its_tools_but_waits_out_a_bare_settle(
        tmp_path: Path) -> None:
    tools = run_scenario(shipped("tool.register.schemas-passed-through"), "stdio",
                         options(work_root=tmp_path))
    assert tools.status == "passed", tools.reason
    [settled] = [s for s in tools.steps if s.op == "settle"]
    assert settled.ended_by == ENDED_BY_EXPECTATIONS
    bare = run_scenario(shipped("wake.fresh-session.inject-once"), "stdio",
                        options(work_root=tmp_path))
    assert bare.status == "passed", bare.reason
    [waited] = [s for s in bare.steps if s.op == "settle"]
    assert waited.ended_by == ENDED_BY_QUIET  # one host settle, its own quiet period


def test_the_journal_since_a_mark_skips_a_record_still_being_written(tmp_path: Path) -> None:
    world = World(shipped("life.transport.default-stdio-child"), "stdio", work_root=tmp_path)
    world.open()
    try:
        world.journal.write_text('{"kind": "before"}\n')
        mark = world.journal_mark()
        with open(world.journal, "a", encoding="utf-8") as handle:
            handle.write('{"kind": "after"}\n{"kind": "half')
        assert world.journal_since(mark) == [{"kind": "after"}]
        assert world.journal_since(0) == [{"kind": "before"}, {"kind": "after"}]
    finally:
        world.close()


# -- waiting for tools registered in the background ---------------------------------------------

def test_a_settle_expecting_tools_waits_past_its_quiet_window_until_one_is_registered(
        tmp_path: Path) -> None:
    # the tools come 600 ms after session_start, with nothing in between: a quiet window of
    # 100 ms alone would end the settle before them
    result, record, _ = run_settle(
        tmp_path, "life.settle.tools-background",
        {"op": "settle", "quiet_ms": 100, "max_ms": 8000,
         "expect": {"tools": {"registered": ["mempalace_status", "mempalace_search"]}}},
        "tools-after:600:mempalace_status,mempalace_search", "quiet-from-call")
    assert result.status == "passed", failing(result)
    assert record.ended_by == ENDED_BY_EXPECTATIONS
    # well past the 100 ms quiet window; not 600: the host's 600 ms run from session_start,
    # and the settle begins a few ms later (593 ms measured once on a loaded machine)
    assert record.elapsed_ms is not None and record.elapsed_ms >= 400


def test_until_tools_waits_for_a_registration_then_for_the_quiet_window(tmp_path: Path) -> None:
    result, record, requests = run_settle(
        tmp_path, "life.settle.until-tools",
        {"op": "settle", "quiet_ms": 100, "max_ms": 8000, "until": "tools"},
        "tools-after:600:mempalace_status", "quiet-from-call")
    assert result.status == "passed", failing(result)
    assert record.ended_by == ENDED_BY_QUIET  # no expectation to end on: the quiet after them
    assert [e["name"] for e in record.effects if e["kind"] == "tool_registered"] == [
        "mempalace_status"]
    # the registration (600 ms from session_start, which ended a few ms before the settle
    # began) and then the 100 ms quiet window: well past either alone
    assert record.elapsed_ms is not None and record.elapsed_ms >= 500
    assert all("until" not in r for r in requests)  # the runner's own field, not the host's


def test_until_tools_is_bounded_by_max_ms(tmp_path: Path) -> None:
    result, record, _ = run_settle(
        tmp_path, "life.settle.until-never",
        {"op": "settle", "quiet_ms": 100, "max_ms": 700, "until": "tools"}, "quiet-from-call")
    assert result.status == "passed", failing(result)  # waiting is not an expectation
    assert record.ended_by == ENDED_BY_MAX
    assert record.elapsed_ms is not None and record.elapsed_ms >= 700


def test_a_tools_expectation_that_never_holds_still_ends_on_quiet_once_tools_are_there(
        tmp_path: Path) -> None:
    result, record, _ = run_settle(
        tmp_path, "life.settle.wrong-tools",
        {"op": "settle", "quiet_ms": 300, "max_ms": 8000,
         "expect": {"tools": {"includes": ["mempalace_search"]}}},
        "tools-after:200:mempalace_status", "quiet-from-call")
    assert failing(result) == ["/steps/2/expect/tools/includes"]
    assert record.ended_by == ENDED_BY_QUIET  # not max_ms: a tool came, the wrong one


def test_until_tools_without_checks_never_ends_on_them() -> None:
    condition = SettleCondition.for_step(
        Step.from_json(2, {"op": "settle", "until": "tools"}), "stdio")
    assert condition is not None and condition.until_tools and not condition.has_checks
    assert not condition.met([], [], [{"name": "a"}])
    assert not condition.may_end_quiet([]) and condition.may_end_quiet([{"name": "a"}])
    assert condition.may_end_quiet(None)  # a host that cannot list tools: nothing to wait for
    # a negative settle that waits for tools keeps its window after them, judged at the end
    negative = SettleCondition.for_step(Step.from_json(2, {
        "op": "settle", "until": "tools",
        "expect": {"effects": [{"check": "absent", "match": {"kind": "message"}}]}}), "stdio")
    assert negative is not None and not negative.has_checks and negative.until_tools
