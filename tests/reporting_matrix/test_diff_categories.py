"""``diff``'s masking rules, categories and UI mask on synthetic runs: per-run values never
drift, UI-only effects only on request, and every category reports its own first divergence."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palace_conformance.runner.compare import categories, drift_trace, volatile
from palace_conformance.runner.compare.diff import compare, render_markdown, render_text
from palace_conformance.runner.results import ScenarioResult, StepRecord

from .support import ALL_CAPS, eager_steps, failing, lazy_steps, result, source, step, wakeup

SID = "fake.lock.loser-is-read-only"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "drift.md"


def lock_error(pid: int, holder: str = "mempalace mine") -> dict[str, Any]:
    """A palace ``tool_error`` whose message and data quote the lock holder's pid."""
    why = f"palace is held by PID {pid} ({holder}); wait for it to finish"
    return {"kind": "tool_error", "code": -32001, "message": f"lock held: {why}",
            "data": {"reason": why, "holder_pid": pid}}


def journalled(steps: list[StepRecord], per_step: dict[str, list[dict[str, Any]]],
               pid: int = 4000) -> list[dict[str, Any]]:
    """A journal with ``per_step[key]``'s records written while that step ran (each record
    stamped with a time and the writer's pid, as the fake does); sets each step's window."""
    journal: list[dict[str, Any]] = [{"t": 1.0, "pid": pid, "transport": "stdio",
                                      "kind": "process_start", "argv": ["mempalace-mcp"]}]
    for s in steps:
        s.journal_start = len(journal)
        for record in per_step.get(s.key, []):
            journal.append({"t": 2.0 + len(journal), "pid": pid, "transport": "stdio",
                            **record})
        s.journal_end = len(journal)
    return journal


def call(tool: str, request_id: int, **arguments: Any) -> dict[str, Any]:
    return {"kind": "recv", "method": "tools/call", "tool": tool, "id": request_id,
            "message": {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                        "params": {"name": tool, "arguments": arguments}}}


def run_of(steps: list[StepRecord], tmp: str, journal: list[dict[str, Any]] | None = None,
           **kwargs: Any) -> ScenarioResult:
    """A live run (``journal`` None: one with the child's start and nothing else), or, with
    ``journal=[]``, one read back from a saved result."""
    found = result(SID, "stdio", steps, tmp=tmp, **kwargs)
    found.journal = journalled(steps, {}) if journal is None else journal
    return found


def diff(left: ScenarioResult, right: ScenarioResult, **kwargs: Any) -> Any:
    kwargs.setdefault("every_pair", True)  # the trace mechanics, both-pass pairs too
    return compare(source("ref", left), source("other", right), **kwargs)


# -- per-run values ------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", volatile.TEXT_RULES, ids=lambda r: r.name)
def test_every_text_rule_masks_its_example(rule: volatile.TextRule) -> None:
    assert rule.example and rule.masked
    assert volatile.Masker().text(rule.example) == rule.masked


@pytest.mark.parametrize("rule", volatile.KEY_RULES, ids=lambda r: r.name)
def test_every_key_rule_masks_its_example(rule: volatile.KeyRule) -> None:
    assert rule.example
    masked = volatile.Masker().value(dict(rule.example))
    assert masked == {key: rule.mask for key in rule.example}


def test_text_rules_leave_meaningful_values_alone() -> None:
    masker = volatile.Masker()
    for kept in ("3 drawers in wing_pi", "seq 13 of 20", "code -32001", "fleet/ops",
                 "drawer_wing_room_0123456789abcdef", "timeout after 300 ms",
                 "/home/user/.mempalace/palace", "2026-08-01 diary"):
        assert masker.text(kept) == kept


def test_a_pid_inside_a_lock_message_and_its_data_is_not_drift() -> None:
    left = eager_steps(error=lock_error(12345))
    right = eager_steps(error=lock_error(6527))
    report = diff(run_of(left, "/tmp/pc-run-a"), run_of(right, "/tmp/pc-run-a"))
    assert report.drift == [], render_text(report)
    # the same message naming another holder is a real difference
    other = eager_steps(error=lock_error(6527, holder="another bridge"))
    [drift] = diff(run_of(left, "/tmp/pc-run-a"), run_of(other, "/tmp/pc-run-a")).drift
    assert drift.categories == ["errors"]
    assert drift.step_pointer == "/error/message"


def test_event_ids_sessions_ports_and_foreign_temp_dirs_inside_tool_text_are_not_drift() -> None:
    def steps(stamp: str, session: str, port: int, tmp: str) -> list[StepRecord]:
        found = eager_steps(tmp)
        found[5].result = {"is_error": False, "content": [{"type": "text", "text": (
            f"evt_{stamp}_fdfa466a5d7c filed; session {session} via "
            f"http://127.0.0.1:{port}/mcp; spool /tmp/pi-spool-{stamp[-4:]}/x.json")}]}
        return found

    left = steps("20261201T160055", "9f2c0d5e1b7a4c3d8e6f0a1b2c3d4e5f", 36195, "/tmp/pc-run-a")
    right = steps("20261201T160330", "0a1b2c3d4e5f60718293a4b5c6d7e8f9", 41022, "/tmp/pc-run-b")
    report = diff(run_of(left, "/tmp/pc-run-a"), run_of(right, "/tmp/pc-run-b"))
    assert report.drift == [], render_text(report)
    # the part of the id the palace derives from the event itself still counts
    changed = steps("20261201T160330", "0a1b2c3d4e5f60718293a4b5c6d7e8f9", 41022, "/tmp/pc-run-b")
    changed[5].result["content"][0]["text"] = changed[5].result["content"][0]["text"].replace(
        "fdfa466a5d7c", "0123456789ab")
    [drift] = diff(run_of(left, "/tmp/pc-run-a"), run_of(changed, "/tmp/pc-run-b")).drift
    assert drift.categories == ["tool_results"]


def test_the_run_date_is_masked_only_as_the_run_date() -> None:
    masker = volatile.Masker(days=volatile.run_dates("2026-12-01T16:00:00+00:00"))
    assert masker.text("diary for 2026-12-01, file 20261202.md") == (
        "diary for <date>, file <date>.md")
    assert masker.text("entry of 2026-08-01") == "entry of 2026-08-01"


def test_error_kinds_a_kill_races_between_compare_as_one() -> None:
    def killed(kind: str) -> list[StepRecord]:
        found = eager_steps()
        found[4] = step(4, "server", "kill", request={"op": "server", "action": "kill",
                                                      "signal": "SIGKILL"}, result=None)
        found[5].ok, found[5].result = False, None
        found[5].error = {"kind": kind, "message": "whatever the client said"}
        return found

    a, b = run_of(killed("connection_closed"), "/tmp/pc-run-a"), run_of(
        killed("unavailable"), "/tmp/pc-run-a")
    assert diff(a, b).drift == []
    # before any kill, the same two kinds are different behaviour
    calm_a = eager_steps(error={"kind": "connection_closed", "message": "m"})
    calm_b = eager_steps(error={"kind": "unavailable", "message": "m"})
    [drift] = diff(run_of(calm_a, "/tmp/pc-run-a"), run_of(calm_b, "/tmp/pc-run-a")).drift
    assert (drift.step_pointer, drift.left, drift.right) == (
        "/error/kind", "connection_closed", "unavailable")
    # and after one, a kind outside the race still counts
    [drift] = diff(a, run_of(killed("timeout"), "/tmp/pc-run-a")).drift
    assert drift.right == "timeout"


# -- UI-only effects -----------------------------------------------------------------------------


def toasting(*messages: str) -> list[StepRecord]:
    found = lazy_steps("/tmp/pc-run-a")
    found[1].effects += [{"kind": "notify", "level": "info", "message": m} for m in messages]
    return found


def test_a_notify_only_difference_is_ignored_by_default_and_named() -> None:
    left, right = run_of(eager_steps(), "/tmp/pc-run-a"), run_of(
        toasting("MemPalace: 19 tools"), "/tmp/pc-run-a")
    report = diff(left, right)
    assert report.drift == [] and report.exit_code == 0
    [named] = report.masked()
    assert named.startswith("UI-only effects: notify (0 from ref, 1 from other;")
    assert "--include-ui" in named
    assert f"not compared: {named}" in render_text(report)
    assert report.to_json()["masked"] == [named] and report.to_json()["include_ui"] is False
    # nothing hidden, nothing named
    assert diff(left, left).masked() == []


def test_a_notify_only_difference_is_drift_with_include_ui() -> None:
    left, right = run_of(eager_steps(), "/tmp/pc-run-a"), run_of(
        toasting("MemPalace: 19 tools"), "/tmp/pc-run-a")
    report = diff(left, right, include_ui=True)
    [drift] = report.drift
    assert drift.categories == ["ui"] and report.exit_code == 1
    assert drift.step is not None and drift.step.key == drift_trace.STARTUP_KEY
    assert drift.right == {"kind": "notify", "level": "info", "message": "MemPalace: 19 tools"}
    assert report.masked() == []
    assert "UI only" in render_text(report)
    # nor does a check on a toast count, unless asked for
    toast_check = failing(SID, "stdio", "/expect/effects/0", "a notify effect: none seen")
    toast_check = dataclasses.replace(toast_check, expected={"check": "count",
                                                             "match": {"kind": "notify"}})
    quiet = run_of(eager_steps(), "/tmp/pc-run-a", status="failed", checks=[toast_check])
    assert diff(left, quiet).drift == []
    [drift] = diff(left, quiet, include_ui=True).drift
    assert drift.categories == ["ui"] and drift.kind == "verdict"
    # two toasts worded differently are drift too, once asked for
    [drift] = diff(run_of(toasting("a"), "/tmp/pc-run-a"), right, include_ui=True).drift
    assert drift.step_pointer == "/effects/0/message"


def test_feeding_is_masked_only_when_one_side_declares_it() -> None:
    def feeding(exit_code: int) -> ScenarioResult:
        steps = eager_steps()
        steps[6].effects = [{"kind": "exec", "argv": ["mempalace-pi-session", "--prepare"],
                             "exit_code": exit_code, "timed_out": False}]
        helper = {"kind": "helper_run", "name": "mempalace-pi-session", "argv": ["x"]}
        return run_of(steps, "/tmp/pc-run-a", journalled(steps, {"6": [
            helper, call("mempalace_mine", 9, source="/tmp/pc-run-a/export")]}))

    plain = run_of(eager_steps(), "/tmp/pc-run-a")
    no_feeding = tuple(c for c in ALL_CAPS if c != "feeding")
    report = compare(source("ref", feeding(0)), source("other", plain, caps=no_feeding),
                     every_pair=True)
    assert report.drift == [], render_text(report)
    assert any("only one side has feeding, declared or detected" in m for m in report.masked())
    # both declare it: the helper's exit code and the mine call are compared
    [drift] = diff(feeding(0), feeding(1)).drift
    assert drift.categories == ["processes"] and drift.step_pointer == "/effects/0/exit_code"
    [drift] = diff(feeding(0), plain).drift
    assert drift.categories == ["wire", "processes"]


# -- one divergence per category -----------------------------------------------------------------


def test_differences_in_two_categories_are_both_reported_most_relevant_first() -> None:
    other = eager_steps(second_prompt=wakeup("again"))
    other[5].result["content"][0]["text"] = json.dumps(
        {"drawer_id": "zzz", "filed_at": "2030-01-01T00:00:00",
         "path": "/tmp/pc-run-a/home/.mempalace/palace", "hits": 3})
    report = diff(run_of(eager_steps(), "/tmp/pc-run-a"), run_of(other, "/tmp/pc-run-a"))
    [drift] = report.drift
    assert drift.categories == ["tool_results", "injected"]
    first, second = drift.findings
    assert (first.step_pointer, first.left, first.right) == ("/result/content/0/json/hits", 2, 3)
    assert second.step is not None and second.step.label == "second-prompt"
    assert (second.step_pointer, second.left) == ("/result/messages/0", None)
    text = render_text(report)
    [tool_line] = [line for line in text.splitlines() if line.lstrip().startswith("tool results")]
    [injected_line] = [line for line in text.splitlines()
                       if line.lstrip().startswith("injected context")]
    assert text.index(tool_line) < text.index(injected_line)
    assert 'step #5 call_tool "search", at /result/content/0/json/hits: ref 2 | other 3' in \
        tool_line
    assert "drift by category: tool results 1, injected context 1" in text
    markdown = render_markdown(report)
    assert "| tool results, injected context |" in markdown
    assert "| injected context | step #4 event before_agent_start" in markdown
    data = json.loads(json.dumps(report.to_json()))
    [entry] = data["drift"]
    assert [c["category"] for c in entry["categories"]] == ["tool_results", "injected"]
    assert entry["category"] == "tool_results" and entry["step_pointer"] == (
        "/result/content/0/json/hits")
    assert data["drift_by_category"] == {"tool_results": 1, "injected": 1}


def test_a_check_in_another_category_is_reported_beside_a_trace_difference() -> None:
    lost = failing(SID, "stdio", "/expect/processes/spawned",
                   "1 stdio child(ren) spawned; expected exactly 2")
    report = diff(run_of(eager_steps(), "/tmp/pc-run-a"),
                  run_of(eager_steps(second_prompt=wakeup("again")), "/tmp/pc-run-a",
                         status="failed", checks=[lost]))
    [drift] = report.drift
    assert drift.categories == ["injected", "processes"]
    verdict = drift.finding("processes")
    assert verdict is not None and verdict.kind == "verdict"
    assert verdict.checks[1].startswith("fail: 1 stdio child(ren) spawned")


def test_wire_calls_count_by_arguments_not_by_when_they_landed() -> None:
    def run(per_step: dict[str, list[dict[str, Any]]], pid: int) -> ScenarioResult:
        steps = eager_steps()
        steps.insert(5, step(5, "settle", "after-second", request={"op": "settle"}))
        for index, s in enumerate(steps[:-1]):
            s.index = index
        return run_of(steps, "/tmp/pc-run-a", journalled(steps, per_step, pid))

    prompt = call("mempalace_diary_read", 4, agent_name="pi")
    poll = call("mempalace_event_list", 5, to_agent="pi@box-a", status="open")
    early = run({"first-prompt": [prompt], "second-prompt": [poll]}, pid=101)
    late = run({"first-prompt": [prompt], "after-second": [poll]}, pid=202)  # after it returned
    assert diff(early, late).drift == []
    other_args = run({"first-prompt": [prompt], "second-prompt": [
        call("mempalace_event_list", 5, to_agent="pi@box-b", status="open")]}, pid=303)
    [drift] = diff(early, other_args).drift
    assert drift.categories == ["wire"]
    assert drift.step is not None and drift.step.label == "second-prompt"
    assert drift.step_pointer == "/calls/0/arguments/to_agent"
    missing = run({"first-prompt": [prompt]}, pid=404)
    [drift] = diff(early, missing).drift
    assert drift.categories == ["wire"] and drift.right is None


def test_process_facts_count_spawns_signals_and_exits_whole_run() -> None:
    def run(*records: dict[str, Any]) -> ScenarioResult:
        steps = eager_steps()
        return run_of(steps, "/tmp/pc-run-a", journalled(steps, {"search": list(records)}))

    exit_ok = {"kind": "process_exit", "code": 0, "reason": "stdin EOF"}
    respawn = {"kind": "process_start", "argv": ["mempalace-mcp"]}
    assert diff(run(exit_ok), run(exit_ok)).drift == []
    [drift] = diff(run(exit_ok), run(exit_ok, respawn)).drift
    assert drift.categories == ["processes"]
    assert drift.step is not None and drift.step.key == drift_trace.RUN_KEY
    sigterm = {"kind": "signal", "signal": "SIGTERM", "action": "exit"}
    [drift] = diff(run(exit_ok), run(sigterm)).drift
    assert drift.categories == ["processes"]


def test_a_saved_result_without_its_journal_is_compared_without_journal_facts() -> None:
    steps = eager_steps()
    live = run_of(steps, "/tmp/pc-run-a", journalled(steps, {"search": [call("x", 3)]}))
    saved = run_of(eager_steps(), "/tmp/pc-run-a", journal=[])
    report = compare(source("ref", live), source("other", saved, journals=False),
                     every_pair=True)
    assert report.drift == []
    assert report.without_journal == ("other",)
    assert any("keeps none: other" in m for m in report.masked())
    # two live runs compare their journals, even an empty one (a palace that never started)
    [drift] = diff(live, saved).drift
    assert drift.categories == ["wire"]
    assert diff(saved, saved).masked() == []


# -- the rules are data, and the docs list them ---------------------------------------------------


@pytest.mark.parametrize(("pointer", "expected", "category"), [
    ("/steps/3", None, "errors"),
    ("/steps/3/expect/error/kind", "tool_error", "errors"),
    ("/steps/3/expect/ok", True, "errors"),
    ("/steps/3/expect/result", {}, "tool_results"),
    ("/steps/4/expect/result", {}, "injected"),
    ("/steps/4/expect/effects/0", {"check": "absent", "match": {"kind": "message"}}, "injected"),
    ("/expect/effects/0", {"check": "absent", "match": {"kind": "error"}}, "errors"),
    ("/expect/effects/1", {"check": "absent", "match": {"kind": "notify"}}, "ui"),
    ("/expect/journal/0", {"check": "count", "match": {"kind": "recv"}}, "wire"),
    ("/expect/journal/1", {"check": "count", "match": {"kind": "process_start"}}, "processes"),
    ("/expect/wire_secrets/0", None, "wire"),
    ("/expect/processes/spawned", None, "processes"),
    ("/steps/2/expect/tools/registered", None, "registrations"),
    ("/steps/3/expect/elapsed_ms", None, "other"),
    ("/setup", None, "other"),
])
def test_checks_fall_in_the_category_of_what_they_judge(pointer: str, expected: Any,
                                                        category: str) -> None:
    assert categories.check_category(pointer, expected, {3: "call_tool", 4: "event"}) == category


def test_every_process_record_kind_has_its_compared_fields() -> None:
    assert set(drift_trace.PROCESS_FIELDS) == categories.PROCESS_RECORDS


def test_the_docs_list_every_rule_and_category() -> None:
    text = DOCS.read_text(encoding="utf-8")
    rules = [*volatile.KEY_RULES, *volatile.TEXT_RULES, *volatile.ERROR_KIND_RULES]
    for rule in rules:
        assert re.search(rf"`{re.escape(rule.name)}`", text), f"docs/drift.md: {rule.name}"
    for category in categories.CATEGORIES:
        assert f"**{category.title}**" in text, f"docs/drift.md: {category.title}"
    assert "--include-ui" in text


def test_the_fakes_own_self_tests_are_never_compared() -> None:
    """The runner, not the bridge, is the fake's client there: no difference can be a bridge's."""
    left = run_of(eager_steps(error=lock_error(12345)), "/tmp/pc-run-a")
    right = run_of(eager_steps(error=lock_error(1, holder="another bridge")), "/tmp/pc-run-a")
    assert diff(left, right).drift  # as bridge results they differ ...
    left.subject = right.subject = "fake"
    report = diff(left, right)  # ... as the fake's self-tests they are not compared at all
    assert report.drift == [] and report.agreed == []


def test_two_palaces_replica_ids_are_one_value_wherever_they_appear() -> None:
    """mempalace 3.11 (and the fake) mint a replica id per palace: in events, hlcs and the
    version_vector's keys alike, two runs of one bridge must read the same."""
    def mesh(replica: str) -> dict[str, Any]:
        event = {"origin_replica": replica, "hlc": f"1796014199840-000000-{replica}"}
        return {"self": {"replica_id": replica, "version_vector": {replica: 1}},
                "events": [event], "note": f"written by {replica}"}

    one, two = (volatile.Masker().value(mesh(r)) for r in (
        "rep_e72c2f076408faadc4b073c46019005d", "rep_9d3aaca75da286d8520064056c989c68"))
    assert one == two
    assert one["self"]["version_vector"] == {"<replica>": 1}
    assert one["note"] == "written by <replica>"


def test_a_process_difference_says_which_step_and_which_child() -> None:
    def run(*records: dict[str, Any]) -> ScenarioResult:
        steps = eager_steps()
        return run_of(steps, "/tmp/pc-run-a", journalled(steps, {"search": list(records)}))

    crash = {"kind": "process_exit", "code": 1, "reason": "fault exit before reply"}
    clean = {"kind": "process_exit", "code": 0, "reason": "stdin EOF"}
    [drift] = diff(run(crash), run(clean)).drift
    finding = drift.finding("processes")
    assert finding is not None and finding.left["child"] == 1
    assert finding.left["step"] == "search" and finding.left["code"] == 1
    assert "(child #1 exited during step search)" in finding.where()
    assert "child #1 exited during step search" in render_text(diff(run(crash), run(clean)))


def test_empty_null_and_absent_are_one_value() -> None:
    empty, none = eager_steps(), eager_steps()
    empty[5].result = {**empty[5].result, "details": {}}
    none[5].result = {**none[5].result, "details": None}
    report = diff(run_of(empty, "/tmp/pc-run-a"), run_of(none, "/tmp/pc-run-a"))
    assert report.drift == [] and report.trace_only == []
    other = eager_steps()
    other[5].result = {**other[5].result, "details": {"raw": 1}}
    [drift] = diff(run_of(empty, "/tmp/pc-run-a"), run_of(other, "/tmp/pc-run-a")).drift
    assert drift.pointer.endswith("/details") and drift.right == {"raw": 1}


def test_registrations_under_a_map_compare_only_what_both_can_offer() -> None:
    curated = eager_steps()
    curated[0].result = {**curated[0].result, "tools": ["mempalace_search"]}
    curated[0].effects = [e for e in curated[0].effects
                          if e.get("name") == "mempalace_search" or e["kind"] != "tool_registered"]
    offered = frozenset({"mempalace_search"})
    full = source("ref", run_of(eager_steps(), "/tmp/pc-run-a"))
    mapped = dataclasses.replace(source("curated", run_of(curated, "/tmp/pc-run-a")),
                                 offered=offered)
    report = compare(full, mapped, every_pair=True)
    assert [d for d in report.drift if "registrations" in d.categories] == []
    assert any("registrations of tools outside the 1 a profile maps" in m
               for m in report.masked())
    # without the map, the same two runs drift on the tools one side lacks
    plain = source("curated", run_of(curated, "/tmp/pc-run-a"))
    [drift] = compare(full, plain, every_pair=True).drift
    assert "registrations" in drift.categories


def _ruled(masker: volatile.Masker, text: str) -> str:
    """``text`` through ``masker``'s replacements and rules, without any memo."""
    for raw, name in masker.replacements:
        text = text.replace(raw, name)
    for rule in masker.rules:
        text = rule.apply(text)
    return text


@given(st.lists(st.sampled_from(["/tmp/pc-run-a", "/tmp/pc-run-b", "pid 4242", "rep_" + "e" * 32,
                                 "2026-12-01T16:00:00Z", "127.0.0.1:8080", "Bearer abc", "wing",
                                 " ", "/", "x"]), max_size=6).map("".join))
def test_runs_sharing_the_rules_memo_mask_as_each_alone(text: str) -> None:
    """The rules' results are shared by every masker with the same rules, keyed by the text
    after a run's own replacements: a run's ``${TMP}`` never reaches another run's masking."""
    days = volatile.run_dates("2026-12-01T16:00:00+00:00")
    a = volatile.Masker([("/tmp/pc-run-a", "${TMP}")], days)
    b = volatile.Masker([("/tmp/pc-run-b", "${TMP}")], days)
    plain = volatile.Masker(days=days)
    for masker in (a, b, plain, a, plain, b):
        assert masker.text(text) == _ruled(masker, text)


def test_the_rules_memo_is_shared_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    days = volatile.run_dates("2031-01-01T00:00:00+00:00")  # a rule set of this test's own
    first, second = volatile.Masker(days=days), volatile.Masker(days=days)
    assert first._ruled is second._ruled
    assert volatile.Masker(days=volatile.run_dates("2031-06-01T00:00:00+00:00"))._ruled \
        is not first._ruled
    assert first.text("held by pid 12345") == "held by pid <pid>"
    assert first._ruled.texts["held by pid 12345"] == "held by pid <pid>"
    monkeypatch.setattr(volatile, "RULE_MEMO_CHARS", 40)
    for n in range(10):
        assert second.text(f"pid {n} on 127.0.0.1:{8000 + n}") == "pid <pid> on 127.0.0.1:<port>"
    assert len(second._ruled.texts) < 10  # started afresh on the way
    assert second._ruled.chars <= 40 + 64  # one entry past the bound at most
