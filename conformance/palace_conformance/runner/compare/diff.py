"""Drift between two bridges: where, category by category, their traces part.

Pass/fail per bridge says *that* two bridges differ; a drift report says *where*: for every
(scenario, transport) both ran, the first divergence of each category (:mod:`.categories`: tool
results, error kinds, injected context, registrations, the wire, the processes, ...), each with
its step, the JSON pointer inside it and both values. One cosmetic difference cannot hide another
that matters: each category has its own first divergence. The traces (:mod:`.drift_trace`) are
built from each run's raw steps and journal with every per-run value masked (:mod:`.volatile`),
so two runs of one bridge never drift.

When a category's traces agree but a check in it has different verdicts (a difference the trace
does not carry: the wire journal count, the processes alive at the end), the first check one
bridge passes and the other fails is that category's evidence. A scenario one bridge cannot run
(not applicable) is listed apart, never as drift; one that could not be set up on a side (not
testable) cannot be compared and is listed apart too, and, like drift, makes the comparison red:
nobody can say the bridges agree there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from palace_conformance import json_pointer
from palace_conformance.runner.compare.categories import (
    BY_NAME,
    CATEGORIES,
    ORDER,
    OTHER,
    PROCESSES,
    UI,
    UI_ONLY_EFFECTS,
    check_category,
)
from palace_conformance.runner.compare.drift_trace import (
    RUN_KEY,
    STARTUP_KEY,
    Masks,
    drift_trace,
    squash,
    ui_effects,
)
from palace_conformance.runner.compare.sources import Source
from palace_conformance.runner.results import (
    NOT_APPLICABLE,
    NOT_TESTABLE,
    PARITY,
    PASSED,
    CheckRecord,
    ScenarioResult,
)
from palace_conformance.runner.verdict.normalise import first_difference

__all__ = ["STARTUP_KEY", "DiffReport", "Divergence", "Finding", "Masks", "compare",
           "compare_pair", "drift_trace", "render_markdown", "render_text"]

TRANSPORT_RANK = {"stdio": 0, "http": 1}
DIFF_FORMAT = 2


# -- the comparison ----------------------------------------------------------------------------


@dataclass
class StepInfo:
    """Which step a pointer falls in: index, op (``event NAME`` for events), label."""

    key: str
    index: int | None
    op: str
    label: str | None

    def describe(self) -> str:
        if self.key == STARTUP_KEY:
            return "(start-up): the steps before the first agent-facing one, pooled"
        if self.key == RUN_KEY:
            return "(whole run): process facts from the fake's journal"
        where = f"step #{self.index} {self.op}" if self.index is not None else f"step {self.key}"
        return where + (f' "{self.label}"' if self.label else "")

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "index": self.index, "op": self.op, "label": self.label}


@dataclass
class Finding:
    """The first divergence of one category.

    ``kind`` is ``trace`` (the category's traces differ at ``pointer``) or ``verdict`` (they
    agree; ``pointer`` is the first check of the category one side passes and the other fails).
    """

    category: str
    kind: str
    pointer: str
    left: Any
    right: Any
    step: StepInfo | None = None
    checks: tuple[str, str] = ("", "")  # the check messages, for a verdict finding

    @property
    def title(self) -> str:
        return BY_NAME[self.category].title if self.category in BY_NAME else self.category

    @property
    def step_pointer(self) -> str:
        """The pointer inside the step (``/result/messages/0``), or the whole pointer."""
        if self.kind == "trace" and self.step is not None:
            prefix = "/steps/" + json_pointer.escape(self.step.key)
            if self.pointer.startswith(prefix):
                return self.pointer[len(prefix):] or "/"
        return self.pointer

    def where(self) -> str:
        if self.kind == "trace":
            step = self.step.describe() if self.step else "the trace"
            context = _process_context(self.left, self.right)
            return f"{step}, at {self.step_pointer}" + (f" ({context})" if context else "")
        return f"traces agree; first check that differs: {self.pointer}"

    def to_json(self) -> dict[str, Any]:
        return {"category": self.category, "title": self.title, "kind": self.kind,
                "pointer": self.pointer, "step": self.step.to_json() if self.step else None,
                "step_pointer": self.step_pointer, "left": self.left, "right": self.right,
                "checks": list(self.checks)}


def _process_context(*facts: Any) -> str:
    """For a process fact (drift_trace: which step's window, which child by start order), the
    step and the process it happened to, in words."""
    for fact in facts:
        if isinstance(fact, dict) and "kind" in fact and ("step" in fact or "child" in fact):
            child = f"child #{fact['child']}" if "child" in fact else "a process"
            what = {"process_start": "started", "process_exit": "exited",
                    "signal": "was signalled", "helper_run": "ran a helper"}.get(
                        str(fact["kind"]), str(fact["kind"]))
            return f"{child} {what} during step {fact.get('step', '?')}"
    return ""


def _whole_fact(pointer: str, left: Any, right: Any, a: Any, b: Any) -> tuple[str, Any, Any]:
    """A processes difference inside one fact (``.../journal/3/code``) as the whole fact on each
    side, at the fact's pointer."""
    parts = pointer.split("/")
    if "journal" not in parts or len(parts) <= parts.index("journal") + 2:
        return pointer, a, b
    cut = parts.index("journal") + 2
    facts = []
    for trace in (left, right):
        value = trace
        for token in parts[1:cut]:
            key = json_pointer.unescape(token)
            if isinstance(value, dict):
                value = value.get(key)
            elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
                value = value[int(key)]
            else:
                value = None
        facts.append(value)
    return "/".join(parts[:cut]), facts[0], facts[1]


@dataclass
class Divergence:
    """One (scenario, transport) where the two bridges part: the first divergence of every
    category that has one, most agent-relevant first. The first of them is the headline (its
    fields are repeated at the top of the JSON, as before categories existed)."""

    scenario: str
    transport: str
    statuses: tuple[str, str]
    findings: list[Finding]
    title: str = ""
    covers: tuple[str, ...] = ()
    #: different statuses, or both failed with a check one side passes and the other fails:
    #: what is judged differs (else only the traces do, or a note the level does not count,
    #: and the pair is listed only with ``--all``)
    judged: bool = True

    @property
    def id(self) -> str:
        return f"{self.scenario}[{self.transport}]"

    @property
    def headline(self) -> Finding:
        return self.findings[0]

    @property
    def kind(self) -> str:
        return self.headline.kind

    @property
    def pointer(self) -> str:
        return self.headline.pointer

    @property
    def left(self) -> Any:
        return self.headline.left

    @property
    def right(self) -> Any:
        return self.headline.right

    @property
    def step(self) -> StepInfo | None:
        return self.headline.step

    @property
    def step_pointer(self) -> str:
        return self.headline.step_pointer

    @property
    def checks(self) -> tuple[str, str]:
        return self.headline.checks

    @property
    def categories(self) -> list[str]:
        return [f.category for f in self.findings]

    def finding(self, category: str) -> Finding | None:
        return next((f for f in self.findings if f.category == category), None)

    def to_json(self) -> dict[str, Any]:
        headline = self.headline.to_json()
        return {"id": self.id, "scenario": self.scenario, "transport": self.transport,
                "title": self.title, "covers": list(self.covers),
                "statuses": list(self.statuses), "kind": headline["kind"],
                "category": headline["category"], "pointer": headline["pointer"],
                "step": headline["step"], "step_pointer": headline["step_pointer"],
                "left": headline["left"], "right": headline["right"],
                "checks": headline["checks"], "categories": [f.to_json() for f in self.findings]}


@dataclass
class Apart:
    """A (scenario, transport) not compared: not applicable, not testable, or on one side only."""

    scenario: str
    transport: str
    why: str
    statuses: tuple[str | None, str | None]

    @property
    def id(self) -> str:
        return f"{self.scenario}[{self.transport}]"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "scenario": self.scenario, "transport": self.transport,
                "why": self.why, "statuses": list(self.statuses)}


@dataclass
class DiffReport:
    left: Source
    right: Source
    masks: Masks
    drift: list[Divergence] = field(default_factory=list)
    agreed: list[str] = field(default_factory=list)
    not_applicable: list[Apart] = field(default_factory=list)
    incomparable: list[Apart] = field(default_factory=list)
    #: pairs with the same verdicts and checks whose traces differ (listed with ``--all``)
    trace_only: list[Divergence] = field(default_factory=list)
    ui_masked: tuple[int, int] = (0, 0)  # UI-only effects left out, per side
    without_journal: tuple[str, ...] = ()  # the sources whose results hold no journal

    @property
    def exit_code(self) -> int:
        """1 on any drift, or when a pair could not be compared; 0 otherwise."""
        return 1 if self.drift or self.incomparable else 0

    def masked(self) -> list[str]:
        """Everything left out of the comparison, in words (only what applied to this run)."""
        out = self.masks.describe()
        if self.masks.ui and any(self.ui_masked):
            kinds = ", ".join(sorted(UI_ONLY_EFFECTS))
            out.append(f"UI-only effects: {kinds} ({self.ui_masked[0]} from {self.left.label}, "
                       f"{self.ui_masked[1]} from {self.right.label}; --include-ui compares "
                       "them)")
        if self.without_journal:
            out.append("wire calls and process facts from the fake's journal (a saved 'run "
                       f"--json' result keeps none: {', '.join(self.without_journal)}; their "
                       "checks still count)")
        return out

    def counts(self) -> dict[str, int]:
        """Drifting pairs per category, in category order."""
        counts = {c.name: 0 for c in CATEGORIES}
        for d in self.drift:
            for category in d.categories:
                counts[category] = counts.get(category, 0) + 1
        return {name: n for name, n in counts.items() if n}

    def to_json(self) -> dict[str, Any]:
        return {
            "format": DIFF_FORMAT,
            "bridges": [{"label": s.label, "origin": s.origin, "host": s.run.host.to_json()}
                        for s in (self.left, self.right)],
            "masked": self.masked(), "include_ui": not self.masks.ui,
            "categories": [{"name": c.name, "title": c.title} for c in CATEGORIES],
            "drift_by_category": self.counts(), "drift": [d.to_json() for d in self.drift],
            "agreed": self.agreed, "trace_only": [d.to_json() for d in self.trace_only],
            "not_applicable": [a.to_json() for a in self.not_applicable],
            "incomparable": [a.to_json() for a in self.incomparable], "ok": self.exit_code == 0}


def step_at(pointer: str, *results: ScenarioResult) -> StepInfo | None:
    """The step a trace pointer (``/steps/<key>/...``) falls in."""
    parts = pointer.split("/")
    if len(parts) < 3 or parts[1] != "steps":
        return None
    key = json_pointer.unescape(parts[2])
    if key == STARTUP_KEY:
        return StepInfo(key, None, "start-up", None)
    if key == RUN_KEY:
        return StepInfo(key, None, "whole run", None)
    for result in results:
        for step in result.steps:
            if step.key == key and step.index >= 0:
                op = step.op
                if op == "event" and step.request.get("name"):
                    op = f"event {step.request['name']}"
                label = key if key != str(step.index) else None
                return StepInfo(key, step.index, op, label)
    return StepInfo(key, None, "?", None)


def _ops(*results: ScenarioResult) -> dict[int, str]:
    return {s.index: s.op for r in results for s in r.steps if s.index >= 0}


def _verdict_findings(left: ScenarioResult, right: ScenarioResult) -> dict[str, Finding]:
    """Per category, the first check one side fails and the other does not (passes it, or
    has no such check)."""
    a = {c.pointer: c for c in left.checks}
    b = {c.pointer: c for c in right.checks}
    ops = _ops(left, right)
    found: dict[str, Finding] = {}
    for pointer in [*a, *(p for p in b if p not in a)]:
        first, second = a.get(pointer), b.get(pointer)
        if (first is not None and not first.passed) == (second is not None
                                                         and not second.passed):
            continue
        either = first or second
        assert either is not None
        category = check_category(pointer, either.expected, ops)
        if category not in found:
            found[category] = Finding(category, "verdict", pointer, _got(first), _got(second),
                                      checks=(_message(first), _message(second)))
    return found


def _got(check: CheckRecord | None) -> Any:
    return check.got if check is not None else None


def _message(check: CheckRecord | None) -> str:
    return f"{check.status}: {check.message}" if check is not None else "(no such check)"


def compare_pair(left: ScenarioResult, right: ScenarioResult, masks: Masks, *,
                 started_at: tuple[str, str] = ("", ""),
                 journal: bool = True) -> Divergence | None:
    """The first divergence of each category of two runs of the same (scenario, transport),
    or None when they agree everywhere. ``journal``: both hold the fake's journal."""
    traces = (squash(drift_trace(left, masks, started_at=started_at[0], journal=journal)),
              squash(drift_trace(right, masks, started_at=started_at[1], journal=journal)))
    findings: dict[str, Finding] = {}
    for name in (c.name for c in CATEGORIES):
        difference = first_difference(traces[0].get(name), traces[1].get(name))
        if difference is not None:
            pointer, a, b = difference
            if name == PROCESSES:  # the whole fact: what happened, in which step, to which child
                pointer, a, b = _whole_fact(pointer, traces[0].get(name), traces[1].get(name), a, b)
            findings[name] = Finding(name, "trace", pointer, a, b,
                                     step=step_at(pointer, left, right))
    verdicts = _verdict_findings(left, right)
    for name, finding in verdicts.items():
        if not (masks.ui and name == UI):  # a check on a toast is no more drift than the toast
            findings.setdefault(name, finding)
    if not findings and not verdicts and left.status != right.status:
        findings[OTHER] = Finding(OTHER, "verdict", "/", None, None,
                                  checks=(left.reason, right.reason))
    if not findings:
        return None
    ordered = sorted(findings.values(), key=lambda f: ORDER.get(f.category, len(ORDER)))
    return Divergence(left.scenario, left.transport, (left.status, right.status), ordered,
                      title=left.title, covers=left.covers,
                      judged=left.status != right.status or (
                          bool(verdicts) and left.status != PASSED))


def _pairs(left: Source, right: Source) -> list[tuple[str, str]]:
    """What to compare: every bridge result. The fake's self-tests are left out: the runner is
    their client, so no difference in them can be a bridge's."""
    keys = {(r.scenario, r.transport) for s in (left, right) for r in s.run.results
            if r.transport != PARITY and r.subject != "fake"}
    return sorted(keys, key=lambda k: (k[0], TRANSPORT_RANK.get(k[1], 9), k[1]))


def compare(left: Source, right: Source, *, include_ui: bool = False,
            every_pair: bool = False) -> DiffReport:
    """Every (scenario, transport) of both sources: drift, agreement, or why not compared.
    ``include_ui``: compare UI-only effects (``notify``) too. Drift is a pair whose verdicts or
    judged checks differ; a pair whose traces alone differ is set aside (``trace_only``) unless
    ``every_pair``."""
    masks = Masks.between(left.capabilities, right.capabilities, include_ui=include_ui,
                          real_server="real" in (left.run.server, right.run.server),
                          offered=(left.offered, right.offered))
    report = DiffReport(left, right, masks)
    report.without_journal = tuple(s.label for s in (left, right) if not s.journals)
    ui_masked = [0, 0]
    for scenario, transport in _pairs(left, right):
        a = left.run.by_id(scenario, transport)
        b = right.run.by_id(scenario, transport)
        statuses = (a.status if a else None, b.status if b else None)
        if a is None or b is None:
            missing = left.label if a is None else right.label
            report.incomparable.append(Apart(scenario, transport,
                                             f"no result from {missing}", statuses))
            continue
        inapplicable = [(s.label, r.reason) for s, r in ((left, a), (right, b))
                        if r.status == NOT_APPLICABLE]
        if inapplicable:
            why = "; ".join(f"{label}: {reason or 'not applicable'}"
                            for label, reason in inapplicable)
            report.not_applicable.append(Apart(scenario, transport, why, statuses))
            continue
        untestable = [(s.label, r.reason) for s, r in ((left, a), (right, b))
                      if r.status == NOT_TESTABLE or r.outcome is None]
        if untestable:
            why = "; ".join(f"{label}: {reason or 'no outcome'}" for label, reason in untestable)
            report.incomparable.append(Apart(scenario, transport, why, statuses))
            continue
        if masks.ui:
            ui_masked[0] += ui_effects(a)
            ui_masked[1] += ui_effects(b)
        found = compare_pair(a, b, masks, started_at=(left.run.started_at,
                                                      right.run.started_at),
                             journal=left.journals and right.journals)
        if found is None:
            report.agreed.append(f"{scenario}[{transport}]")
        elif found.judged or every_pair:
            report.drift.append(found)
        else:
            report.trace_only.append(found)
    report.ui_masked = (ui_masked[0], ui_masked[1])
    # the pairs whose verdicts differ first: those are what a maintainer acts on; drift where
    # both sides passed (or both failed) follows, each group in catalogue order
    report.drift.sort(key=lambda d: d.statuses[0] == d.statuses[1])
    return report


# -- rendering ----------------------------------------------------------------------------------


def shown(value: Any, limit: int = 200) -> str:
    """A value on one line, cut at ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _values(finding: Finding, limit: int) -> tuple[str, str]:
    if finding.kind == "verdict":
        return finding.checks
    return shown(finding.left, limit), shown(finding.right, limit)


def _title_width(findings: Sequence[Finding]) -> int:
    return max((len(f.title) for f in findings), default=0)


def render_text(report: DiffReport, limit: int = 120) -> str:
    """What ``diff`` prints: per drifting pair one line per diverging category (its first
    divergence, both values cut at ``limit``), then what was not compared, then the totals."""
    a, b = report.left.label, report.right.label
    lines = [f"diff {a} vs {b}"]
    for mask in report.masked():
        lines.append(f"  not compared: {mask}")
    width = _title_width([f for d in report.drift for f in d.findings])
    for d in report.drift:
        lines.append("")
        lines.append(f"DRIFT {d.id}  {a}: {d.statuses[0]}  {b}: {d.statuses[1]}")
        if d.covers:
            lines.append(f"  covers {', '.join(d.covers)}: {d.title}")
        for finding in d.findings:
            left, right = _values(finding, limit)
            lines.append(f"  {finding.title:<{width}}  {finding.where()}: "
                         f"{a} {left} | {b} {right}")
    if report.not_applicable:
        lines.append("")
        lines.append("not applicable (not drift):")
        lines += [f"  {x.id}: {x.why}" for x in report.not_applicable]
    if report.incomparable:
        lines.append("")
        lines.append("not compared (cannot say whether they agree):")
        lines += [f"  {x.id}: {x.why}" for x in report.incomparable]
    lines.append("")
    counts = category_line(report)
    if counts:
        lines.append(counts)
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"


def category_line(report: DiffReport) -> str:
    """``drift by category: tool results 3, wire 1`` (empty when nothing drifts)."""
    counts = report.counts()
    if not counts:
        return ""
    return "drift by category: " + ", ".join(f"{BY_NAME[name].title} {n}"
                                             for name, n in counts.items())


def summary_line(report: DiffReport) -> str:
    verdict = "DRIFT" if report.drift else ("INCOMPLETE" if report.incomparable else "SAME")
    traces = (f", {len(report.trace_only)} agreeing in every verdict with traces that differ "
              "(--all lists them)" if report.trace_only else "")
    return (f"{verdict}: {len(report.drift)} drifting, {len(report.agreed)} agreeing{traces}, "
            f"{len(report.not_applicable)} not applicable, {len(report.incomparable)} not "
            f"compared ({report.left.label} vs {report.right.label})")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: DiffReport, limit: int = 200) -> str:
    """The same report as Markdown (a PR comment, a CI summary): one table row per drifting
    pair naming its categories, then per pair one row per diverging category."""
    a, b = report.left.label, report.right.label
    out = [f"# Drift: `{a}` vs `{b}`", "", summary_line(report), ""]
    counts = category_line(report)
    if counts:
        out += [counts, ""]
    if report.masked():
        out += ["Not compared: " + "; ".join(report.masked()) + ".", ""]
    if report.drift:
        out += ["| scenario | transport | " + _md(a) + " | " + _md(b) + " | diverges in |",
                "|---|---|---|---|---|"]
        for d in report.drift:
            titles = ", ".join(f.title for f in d.findings)
            out.append(f"| `{d.scenario}` | {d.transport} | {d.statuses[0]} | {d.statuses[1]} "
                       f"| {_md(titles)} |")
        out.append("")
        for d in report.drift:
            out += [f"## `{d.id}`", ""]
            if d.covers:
                out += [f"Covers {', '.join(d.covers)}: {d.title}", ""]
            out += [f"| category | where | {_md(a)} | {_md(b)} |", "|---|---|---|---|"]
            for finding in d.findings:
                left, right = _values(finding, limit)
                out.append(f"| {finding.title} | {_md(finding.where())} | `{_md(left)}` "
                           f"| `{_md(right)}` |")
            out.append("")
    for title, items in (("Not applicable (not drift)", report.not_applicable),
                         ("Not compared", report.incomparable)):
        if items:
            out += [f"## {title}", ""] + [f"- `{x.id}`: {_md(x.why)}" for x in items] + [""]
    return "\n".join(out)
