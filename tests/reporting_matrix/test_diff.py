"""``diff``'s engine on synthetic results: what counts as drift, what never does."""

from __future__ import annotations

import json

from palace_conformance.runner.compare.diff import (
    STARTUP_KEY,
    Masks,
    compare,
    drift_trace,
    render_markdown,
    render_text,
)

from .support import (
    ALL_CAPS,
    eager_steps,
    failing,
    lazy_steps,
    not_applicable,
    result,
    source,
    wakeup,
)

SID = "wake.fresh-session.inject-once"


def tmp_of(steps) -> str:
    """The run dir the steps were made with (each side's paths are under its own run dir)."""
    text = json.dumps([s.to_json() for s in steps])
    if "/tmp/" not in text:
        return "/tmp/pc-run-a"
    return "/tmp/" + text[text.index("/tmp/") + 5:].split("/", 1)[0]


def pair(left_steps, right_steps, *, left_tmp=None, right_tmp=None,
         left_caps=ALL_CAPS, right_caps=ALL_CAPS, **kwargs):
    left_tmp = left_tmp or tmp_of(left_steps)
    right_tmp = right_tmp or tmp_of(right_steps)
    left = source("ref", result(SID, "stdio", left_steps, tmp=left_tmp, **kwargs),
                  caps=left_caps)
    right = source("other", result(SID, "stdio", right_steps, tmp=right_tmp, **kwargs),
                   caps=right_caps)
    return compare(left, right, every_pair=True)  # the trace mechanics, both-pass pairs too


def test_volatile_fields_and_registration_timing_never_count() -> None:
    # different temp dirs, pids, ids, times, durations; tools registered at load on one side and
    # at session_start on the other; different event subscriptions and stderr lines
    report = pair(eager_steps("/tmp/pc-run-a", pid=101), lazy_steps("/tmp/pc-run-b", pid=202))
    assert report.drift == [], render_text(report)
    assert report.agreed == [f"{SID}[stdio]"] and report.exit_code == 0


def test_the_first_divergent_step_is_named_with_pointer_and_both_values() -> None:
    report = pair(eager_steps(), eager_steps(second_prompt=wakeup("again")))
    [drift] = report.drift
    assert drift.kind == "trace" and report.exit_code == 1
    assert drift.pointer == "/steps/second-prompt/result/messages/0"
    assert drift.step is not None
    assert (drift.step.index, drift.step.op, drift.step.label) == (
        4, "event before_agent_start", "second-prompt")
    assert drift.step_pointer == "/result/messages/0"
    assert drift.left is None
    assert drift.right == {"custom_type": "mempalace-wakeup", "content": "again"}
    text = render_text(report)
    assert 'step #4 event before_agent_start "second-prompt", at /result/messages/0' in text
    assert '"content": "again"' in text and text.rstrip().endswith("(ref vs other)")
    assert text.splitlines()[-1].startswith("DRIFT: 1 drifting, 0 agreeing")


def test_a_missing_tool_after_start_up_is_drift_at_the_start_up_pseudo_step() -> None:
    lazy = lazy_steps()
    lazy[1].effects = lazy[1].effects[:2]  # mempalace_diary_read never registered
    [drift] = pair(eager_steps(), lazy).drift
    assert drift.pointer == f"/steps/{STARTUP_KEY}/tools/mempalace_diary_read"
    assert (drift.left, drift.right) == (True, None)
    assert drift.step is not None and drift.step.op == "start-up"


def test_registrations_compare_as_sets() -> None:
    """The order tools are registered in is no drift of its own: a scenario that holds a bridge
    to an order says so in a check (``order``), and a verdict that differs is drift."""
    lazy = lazy_steps()
    lazy[1].effects.reverse()
    report = pair(eager_steps(), lazy)
    assert report.drift == [] and report.agreed == [f"{SID}[stdio]"]


def test_a_tool_result_value_difference_is_drift_but_masked_ids_are_not() -> None:
    other = eager_steps(pid=999)
    other[5].result["content"][0]["text"] = json.dumps(
        {"drawer_id": "zzz", "filed_at": "2030-01-01T00:00:00", "path":
         "/tmp/pc-run-a/home/.mempalace/palace", "hits": 3})
    [drift] = pair(eager_steps(), other, right_tmp="/tmp/pc-run-a").drift
    assert drift.pointer == "/steps/search/result/content/0/json/hits"
    assert (drift.left, drift.right) == (2, 3)


def test_errors_compare_by_kind_and_code_and_palace_text_only() -> None:
    timeout_a = {"kind": "timeout", "message": "MCP request timed out after 300ms"}
    timeout_b = {"kind": "timeout", "message": "palace call timed out (300 ms)"}
    assert pair(eager_steps(error=timeout_a), eager_steps(error=timeout_b)).drift == []
    unavailable = {"kind": "unavailable", "message": "MCP client is closed"}
    [drift] = pair(eager_steps(error=timeout_a), eager_steps(error=unavailable)).drift
    assert drift.pointer == "/steps/search/error/kind"
    palace_a = {"kind": "tool_error", "code": -32000, "message": "Internal tool error",
                "data": {"palace": "/tmp/pc-run-a/home/.mempalace/palace"}}
    palace_b = {**palace_a, "data": {"palace": "/tmp/pc-run-b/home/.mempalace/palace"}}
    assert pair(eager_steps(error=palace_a), eager_steps(error=palace_b)).drift == []
    dropped = {k: v for k, v in palace_a.items() if k != "data"}
    [drift] = pair(eager_steps(error=palace_a), eager_steps(error=dropped)).drift
    assert drift.pointer == "/steps/search/error/data"
    reworded = {**palace_a, "message": "Tool failed"}
    [drift] = pair(eager_steps(error=palace_a), eager_steps(error=reworded)).drift
    assert drift.pointer == "/steps/search/error/message"


def test_one_sided_capabilities_are_masked_and_named() -> None:
    no_command = lazy_steps(command=False)
    generic = ("stdio", "http", "wakeup")
    report = pair(eager_steps(), no_command, right_caps=generic)
    assert report.drift == []
    assert any("diary_command" in m for m in report.masks.describe())
    assert "not compared: registered commands" in render_text(report)
    # both declare diary_command: a missing command is drift
    [drift] = pair(eager_steps(), no_command).drift
    # no command at all: {} is squashed like null, so the whole set is the difference
    assert drift.pointer == f"/steps/{STARTUP_KEY}/commands"
    assert drift.right is None and isinstance(drift.left, dict) and len(drift.left) == 1


def test_wakeup_masked_only_when_one_side_lacks_it() -> None:
    silent = eager_steps()
    silent[3].result = {"messages": []}
    silent[3].effects = []
    masks = Masks.between(ALL_CAPS, ("stdio", "http", "diary_command", "mailbox"))
    assert masks.custom_types == {"mempalace-wakeup"}
    left = result(SID, "stdio", eager_steps())
    right = result(SID, "stdio", silent)
    assert drift_trace(left, masks) == drift_trace(right, masks)
    [drift] = pair(eager_steps(), silent).drift
    assert drift.pointer == "/steps/first-prompt/result/messages/0"


def test_agreeing_traces_with_different_verdicts_show_the_check() -> None:
    bad = failing(SID, "stdio", "/expect/journal/0",
                  "journal count process_start: 1 matching record(s); expected exactly 2")
    left = source("ref", result(SID, "stdio", eager_steps()))
    right = source("other", result(SID, "stdio", lazy_steps("/tmp/pc-run-a"), status="failed",
                                   checks=[bad]))
    [drift] = compare(left, right).drift
    assert drift.kind == "verdict" and drift.pointer == "/expect/journal/0"
    assert drift.statuses == ("passed", "failed")
    assert drift.checks[0] == "(no such check)"
    assert drift.checks[1].startswith("fail: journal count process_start")
    assert "traces agree; first check that differs: /expect/journal/0" in render_text(
        compare(left, right))


def test_pairs_whose_verdicts_differ_come_first() -> None:
    """Drift where both sides passed (a wording, a value) is only counted by default: what is
    judged agrees. With ``--all`` it follows the drift a verdict changed on (a defect),
    whatever the catalogue order: the first lines name what to act on."""
    bad = failing("z.defect", "stdio", "/expect/journal/0", "journal count: expected exactly 2")
    left = source("ref", result("a.cosmetic", "stdio", eager_steps()),
                  result("z.defect", "stdio", eager_steps()))
    right = source("other",
                   result("a.cosmetic", "stdio", eager_steps(second_prompt=wakeup("again"))),
                   result("z.defect", "stdio", lazy_steps("/tmp/pc-run-a"), status="failed",
                          checks=[bad]))
    report = compare(left, right)
    assert [d.id for d in report.drift] == ["z.defect[stdio]"]
    assert [d.id for d in report.trace_only] == ["a.cosmetic[stdio]"]
    assert "DRIFT a.cosmetic" not in render_text(report)
    assert "1 agreeing in every verdict with traces that differ (--all lists them)" in \
        render_text(report)
    report = compare(left, right, every_pair=True)
    assert [d.id for d in report.drift] == ["z.defect[stdio]", "a.cosmetic[stdio]"]
    text = render_text(report)
    assert text.index("DRIFT z.defect[stdio]") < text.index("DRIFT a.cosmetic[stdio]")


def test_not_applicable_is_listed_apart_and_not_testable_is_not_compared() -> None:
    left = source("ref", result(SID, "stdio", eager_steps()),
                  result("diary.command.x", "stdio", eager_steps()),
                  result("life.y", "stdio", eager_steps()))
    untestable = result("life.y", "stdio", [], status="not_testable",
                        reason="Not testable: host did not start")
    right = source("other", result(SID, "stdio", lazy_steps("/tmp/pc-run-a")),
                   not_applicable("diary.command.x", "stdio", "the host does not declare "
                                  "diary_command"), untestable)
    report = compare(left, right)
    assert report.drift == [] and report.agreed == [f"{SID}[stdio]"]
    [apart] = report.not_applicable
    assert apart.id == "diary.command.x[stdio]" and "diary_command" in apart.why
    [lost] = report.incomparable
    assert lost.id == "life.y[stdio]" and "host did not start" in lost.why
    assert report.exit_code == 1  # cannot claim agreement where nothing was compared
    text = render_text(report)
    assert "not applicable (not drift):\n  diary.command.x[stdio]" in text
    assert "DRIFT " not in text


def test_markdown_and_json_carry_the_same_divergence() -> None:
    report = pair(eager_steps(), eager_steps(second_prompt=wakeup("again")))
    markdown = render_markdown(report)
    assert "| `wake.fresh-session.inject-once` | stdio | passed | passed |" in markdown
    assert "## `wake.fresh-session.inject-once[stdio]`" in markdown
    data = json.loads(json.dumps(report.to_json()))
    [drift] = data["drift"]
    assert drift["step"] == {"key": "second-prompt", "index": 4,
                             "op": "event before_agent_start", "label": "second-prompt"}
    assert drift["step_pointer"] == "/result/messages/0" and data["ok"] is False
