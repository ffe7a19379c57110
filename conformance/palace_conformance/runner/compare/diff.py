"""Drift between two bridges: where, step by step, their normalised traces part.

Pass/fail per bridge says *that* two bridges differ; a drift report says *where*: for every
(scenario, transport) both ran, the first step whose normalised outcome differs, the JSON pointer
inside it and both values. The traces are the runner's normalised outcomes (:mod:`.normalise`:
ids, times, pids, temp dirs and URLs masked; tool texts parsed), read through a few rules that
only a comparison *between bridges* needs. Each rule removes a difference no agent can observe,
or one that belongs to a capability only one side declares; none hides a different answer,
error kind, injection or registration:

* **Start-up registration is pooled.** The steps before the first agent-facing step (``load``,
  ``event session_start``, ``settle``, ``sleep``) register tools and commands; *which* of them
  does it is each bridge's choice (the reference connects at load, pi's client at session_start)
  and no agent sees the difference. Their registrations are compared once, in order, as the
  pseudo-step ``(start-up)`` after them. A registration later than that stays where it happened.
* **Subscriptions are not behaviour.** ``load``'s ``events`` list (which pi events a bridge
  listens to) is dropped; what the handlers do shows in the steps.
* **Errors are compared by kind and code**, and by message and data only when the palace wrote
  them (``tool_error``, TOOL-04); any other message is each bridge's own prose.
* **Capabilities only one side declares are masked**: the diary command when either lacks
  ``diary_command``, ``mempalace-wakeup`` messages when either lacks ``wakeup``,
  ``mempalace-mailbox`` messages when either lacks ``mailbox``. The report names every mask.

When the traces agree but the verdicts do not (a difference below the agent: the wire, the
journal, the processes), the first check one bridge passes and the other fails is the evidence.
A scenario one bridge cannot run (not applicable) is listed apart, never as drift; one that could
not be set up on a side (not testable) cannot be compared and is listed apart too, and, like
drift, makes the comparison red: nobody can say the bridges agree there.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from palace_conformance import json_pointer
from palace_conformance.contract import MAILBOX_TYPE, WAKEUP_TYPE
from palace_conformance.runner.compare.sources import Source
from palace_conformance.runner.results import (
    NOT_APPLICABLE,
    NOT_TESTABLE,
    PARITY,
    ScenarioResult,
    StepRecord,
)
from palace_conformance.runner.verdict.normalise import (
    first_difference,
    normalise,
    replacement_list,
)

STARTUP_KEY = "(start-up)"
STARTUP_OPS = frozenset({"load", "settle", "sleep"})
STARTUP_EVENTS = frozenset({"session_start"})
TRANSPORT_RANK = {"stdio": 0, "http": 1}
DIFF_FORMAT = 1


@dataclass(frozen=True)
class Masks:
    """What is left out of both traces because one side does not declare it."""

    commands: bool = False
    custom_types: frozenset[str] = frozenset()

    @classmethod
    def between(cls, left: Iterable[str], right: Iterable[str]) -> Masks:
        a, b = set(left), set(right)

        def one_sided(capability: str) -> bool:
            return (capability in a) != (capability in b)

        types = {t for cap, t in (("wakeup", WAKEUP_TYPE), ("mailbox", MAILBOX_TYPE))
                 if one_sided(cap)}
        return cls(commands=one_sided("diary_command"), custom_types=frozenset(types))

    def describe(self) -> list[str]:
        out = []
        if self.commands:
            out.append("registered commands (diary_command is declared by one side only)")
        for custom in sorted(self.custom_types):
            capability = "wakeup" if custom == WAKEUP_TYPE else "mailbox"
            out.append(f"{custom} messages ({capability} is declared by one side only)")
        return out


def _startup_keys(steps: Sequence[StepRecord]) -> list[str]:
    keys = []
    for step in steps:
        if step.index < 0:
            continue
        name = step.request.get("name") if step.op == "event" else None
        if step.op in STARTUP_OPS or (step.op == "event" and name in STARTUP_EVENTS):
            keys.append(step.key)
        else:
            break
    return keys


def _masked_effect(signature: str, masks: Masks) -> bool:
    kind, _, custom = signature.partition(":")
    if masks.commands and kind == "command_registered":
        return True
    return bool(custom) and custom in masks.custom_types


def run_replacements(result: ScenarioResult) -> list[tuple[str, str]]:
    """The run's own temp dir and fake URL, read back from its reported environment.

    The outcome was masked when the run ended; the raw error ``data`` a drift trace adds must be
    masked the same way, and a saved result keeps only the environment (``HOME`` = ``${TMP}/home``,
    the URL the bridge was given)."""
    values: dict[str, str] = {}
    home = result.env.get("HOME")
    if home and PurePosixPath(home).name == "home":
        values["TMP"] = str(PurePosixPath(home).parent)
    url = result.env.get("MEMPALACE_REMOTE_URL")
    if url:
        values["FAKE_URL"] = url
    return replacement_list(values)


def _error(step: StepRecord | None, error: Mapping[str, Any],
           replacements: Sequence[tuple[str, str]]) -> dict[str, Any]:
    kept = {k: error[k] for k in ("kind", "code") if k in error}
    if error.get("kind") == "tool_error":
        if "message" in error:
            kept["message"] = error["message"]
        raw = (step.error or {}) if step is not None else {}
        if raw.get("data") is not None:
            kept["data"] = normalise(raw["data"], replacements)
    return kept


def drift_trace(result: ScenarioResult, masks: Masks = Masks()) -> dict[str, Any]:
    """The normalised outcome of one run as a bridge-to-bridge comparison sees it."""
    outcome_steps: Mapping[str, Any] = (result.outcome or {}).get("steps", {})
    records = {s.key: s for s in result.steps if s.index >= 0}
    startup = _startup_keys(result.steps)
    replacements = run_replacements(result)
    tools: list[str] = []
    commands: list[str] = []
    steps: dict[str, Any] = {}
    for key, original in outcome_steps.items():
        out = copy.deepcopy(original)
        record = records.get(key)
        pooled = key in startup
        loaded = out.get("result")
        if record is not None and record.op == "load" and isinstance(loaded, dict):
            loaded.pop("events", None)
            if pooled:
                tools += [str(t) for t in loaded.pop("tools", None) or ()]
                commands += [str(c) for c in loaded.pop("commands", None) or ()]
        effects = list(out.get("effects") or ())
        if pooled and record is not None:
            for effect in record.effects:
                if effect.get("kind") == "tool_registered":
                    tools.append(str(effect.get("name")))
                elif effect.get("kind") == "command_registered":
                    commands.append(str(effect.get("name")))
            effects = [e for e in effects if e not in ("tool_registered", "command_registered")]
        out["effects"] = [e for e in effects if not _masked_effect(str(e), masks)]
        if isinstance(out.get("error"), dict):
            out["error"] = _error(record, out["error"], replacements)
        if (record is not None and record.op == "event" and isinstance(out.get("result"), dict)
                and isinstance(out["result"].get("messages"), list)):
            out["result"]["messages"] = [
                m for m in out["result"]["messages"]
                if not (isinstance(m, dict) and m.get("custom_type") in masks.custom_types)]
        steps[key] = out
        if startup and key == startup[-1]:
            pooled_out: dict[str, Any] = {"tools": _unique(tools)}
            if not masks.commands:
                pooled_out["commands"] = _unique(commands)
            steps[STARTUP_KEY] = pooled_out
    return {"steps": steps}


def _unique(names: Iterable[str]) -> list[str]:
    """Registration order, each name once (a re-registration is not a second tool)."""
    return list(dict.fromkeys(names))


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
            return "(start-up): tools and commands registered before the first agent-facing step"
        where = f"step #{self.index} {self.op}" if self.index is not None else f"step {self.key}"
        return where + (f' "{self.label}"' if self.label else "")

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "index": self.index, "op": self.op, "label": self.label}


@dataclass
class Divergence:
    """One (scenario, transport) where the two bridges part.

    ``kind`` is ``trace`` (the normalised traces differ at ``pointer``) or ``verdict`` (the traces
    agree; ``pointer`` is the first check one passes and the other fails).
    """

    scenario: str
    transport: str
    kind: str
    statuses: tuple[str, str]
    pointer: str
    left: Any
    right: Any
    step: StepInfo | None = None
    title: str = ""
    covers: tuple[str, ...] = ()
    checks: tuple[str, str] = ("", "")  # the check messages, for a verdict divergence

    @property
    def id(self) -> str:
        return f"{self.scenario}[{self.transport}]"

    @property
    def step_pointer(self) -> str:
        """The pointer inside the step (``/result/messages/0``), or the whole pointer."""
        if self.kind == "trace" and self.step is not None:
            prefix = "/steps/" + json_pointer.escape(self.step.key)
            if self.pointer.startswith(prefix):
                return self.pointer[len(prefix):] or "/"
        return self.pointer

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "scenario": self.scenario, "transport": self.transport,
                "kind": self.kind, "title": self.title, "covers": list(self.covers),
                "statuses": list(self.statuses), "pointer": self.pointer,
                "step": self.step.to_json() if self.step else None,
                "step_pointer": self.step_pointer, "left": self.left, "right": self.right,
                "checks": list(self.checks)}


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

    @property
    def exit_code(self) -> int:
        """1 on any drift, or when a pair could not be compared; 0 otherwise."""
        return 1 if self.drift or self.incomparable else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": DIFF_FORMAT,
            "bridges": [{"label": s.label, "origin": s.origin, "host": s.run.host.to_json()}
                        for s in (self.left, self.right)],
            "masked": self.masks.describe(), "drift": [d.to_json() for d in self.drift],
            "agreed": self.agreed, "not_applicable": [a.to_json() for a in self.not_applicable],
            "incomparable": [a.to_json() for a in self.incomparable], "ok": self.exit_code == 0}


def step_at(pointer: str, *results: ScenarioResult) -> StepInfo | None:
    """The step a trace pointer (``/steps/<key>/...``) falls in."""
    parts = pointer.split("/")
    if len(parts) < 3 or parts[1] != "steps":
        return None
    key = json_pointer.unescape(parts[2])
    if key == STARTUP_KEY:
        return StepInfo(key, None, "start-up", None)
    for result in results:
        for step in result.steps:
            if step.key == key and step.index >= 0:
                op = step.op
                if op == "event" and step.request.get("name"):
                    op = f"event {step.request['name']}"
                label = key if key != str(step.index) else None
                return StepInfo(key, step.index, op, label)
    return StepInfo(key, None, "?", None)


def _checks_by_pointer(result: ScenarioResult) -> dict[str, Any]:
    return {c.pointer: c for c in result.checks}


def _verdict_divergence(left: ScenarioResult,
                        right: ScenarioResult) -> tuple[str, str, str] | None:
    """The first check one side fails and the other does not (passes it, or has no such
    check): (pointer, left message, right message)."""
    a, b = _checks_by_pointer(left), _checks_by_pointer(right)
    for pointer in [*a, *(p for p in b if p not in a)]:
        first, second = a.get(pointer), b.get(pointer)
        if (first is not None and not first.passed) != (second is not None
                                                        and not second.passed):
            return (pointer, f"{first.status}: {first.message}" if first else "(no such check)",
                    f"{second.status}: {second.message}" if second else "(no such check)")
    return None


def compare_pair(left: ScenarioResult, right: ScenarioResult,
                 masks: Masks) -> Divergence | None:
    """The first divergence of two runs of the same (scenario, transport), or None."""
    statuses = (left.status, right.status)
    difference = first_difference(drift_trace(left, masks), drift_trace(right, masks))
    if difference is not None:
        pointer, a, b = difference
        return Divergence(left.scenario, left.transport, "trace", statuses, pointer, a, b,
                          step=step_at(pointer, left, right), title=left.title,
                          covers=left.covers)
    verdict = _verdict_divergence(left, right)
    if verdict is None and left.status == right.status:
        return None
    pointer, a_msg, b_msg = verdict or ("/", left.reason, right.reason)
    return Divergence(left.scenario, left.transport, "verdict", statuses, pointer,
                      _check_value(left, pointer), _check_value(right, pointer),
                      title=left.title, covers=left.covers, checks=(a_msg, b_msg))


def _check_value(result: ScenarioResult, pointer: str) -> Any:
    found = _checks_by_pointer(result).get(pointer)
    return found.got if found is not None else None


def _pairs(left: Source, right: Source) -> list[tuple[str, str]]:
    keys = {(r.scenario, r.transport) for s in (left, right) for r in s.run.results
            if r.transport != PARITY}
    return sorted(keys, key=lambda k: (k[0], TRANSPORT_RANK.get(k[1], 9), k[1]))


def compare(left: Source, right: Source) -> DiffReport:
    """Every (scenario, transport) of both sources: drift, agreement, or why not compared."""
    masks = Masks.between(left.capabilities, right.capabilities)
    report = DiffReport(left, right, masks)
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
        found = compare_pair(a, b, masks)
        if found is None:
            report.agreed.append(f"{scenario}[{transport}]")
        else:
            report.drift.append(found)
    return report


# -- rendering ----------------------------------------------------------------------------------


def shown(value: Any, limit: int = 200) -> str:
    """A value on one line, cut at ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _where(d: Divergence) -> str:
    if d.kind == "trace":
        step = d.step.describe() if d.step else "the trace"
        return f"first divergent step: {step}, at {d.step_pointer}"
    return f"traces agree; first check that differs: {d.pointer}"


def render_text(report: DiffReport, limit: int = 200) -> str:
    """What ``diff`` prints: every drift, then what was not compared, then one totals line."""
    a, b = report.left.label, report.right.label
    width = max(len(a), len(b)) + 1
    lines = [f"diff {a} vs {b}"]
    for mask in report.masks.describe():
        lines.append(f"  not compared: {mask}")
    for d in report.drift:
        lines.append("")
        lines.append(f"DRIFT {d.id}  {a}: {d.statuses[0]}  {b}: {d.statuses[1]}")
        if d.covers:
            lines.append(f"  covers {', '.join(d.covers)}: {d.title}")
        lines.append(f"  {_where(d)}")
        if d.kind == "verdict":
            lines.append(f"    {a + ':':<{width}} {d.checks[0]}")
            lines.append(f"    {b + ':':<{width}} {d.checks[1]}")
        else:
            lines.append(f"    {a + ':':<{width}} {shown(d.left, limit)}")
            lines.append(f"    {b + ':':<{width}} {shown(d.right, limit)}")
    if report.not_applicable:
        lines.append("")
        lines.append("not applicable (not drift):")
        lines += [f"  {x.id}: {x.why}" for x in report.not_applicable]
    if report.incomparable:
        lines.append("")
        lines.append("not compared (cannot say whether they agree):")
        lines += [f"  {x.id}: {x.why}" for x in report.incomparable]
    lines.append("")
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"


def summary_line(report: DiffReport) -> str:
    verdict = "DRIFT" if report.drift else ("INCOMPLETE" if report.incomparable else "SAME")
    return (f"{verdict}: {len(report.drift)} drifting, {len(report.agreed)} agreeing, "
            f"{len(report.not_applicable)} not applicable, {len(report.incomparable)} not "
            f"compared ({report.left.label} vs {report.right.label})")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: DiffReport, limit: int = 400) -> str:
    """The same report as Markdown (a PR comment, a CI summary)."""
    a, b = report.left.label, report.right.label
    out = [f"# Drift: `{a}` vs `{b}`", "", summary_line(report), ""]
    if report.masks.describe():
        out += ["Not compared: " + "; ".join(report.masks.describe()) + ".", ""]
    if report.drift:
        out += ["| scenario | transport | " + _md(a) + " | " + _md(b) + " | where |",
                "|---|---|---|---|---|"]
        for d in report.drift:
            out.append(f"| `{d.scenario}` | {d.transport} | {d.statuses[0]} | {d.statuses[1]} "
                       f"| {_md(_where(d))} |")
        out.append("")
        for d in report.drift:
            out += [f"## `{d.id}`", ""]
            if d.covers:
                out += [f"Covers {', '.join(d.covers)}: {d.title}", ""]
            out += [_where(d) + ":", ""]
            if d.kind == "verdict":
                out += [f"- **{a}**: {_md(d.checks[0])}", f"- **{b}**: {_md(d.checks[1])}", ""]
            else:
                out += ["```", f"{a}: {shown(d.left, limit)}", f"{b}: {shown(d.right, limit)}",
                        "```", ""]
    for title, items in (("Not applicable (not drift)", report.not_applicable),
                         ("Not compared", report.incomparable)):
        if items:
            out += [f"## {title}", ""] + [f"- `{x.id}`: {_md(x.why)}" for x in items] + [""]
    return "\n".join(out)
