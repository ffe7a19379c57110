"""A run as a comparison between bridges sees it: by category, step by step, per-run values masked.

Built from the raw steps (and, for a live run, the fake's journal), not from the outcome saved with
the result, so the masking rules of :mod:`.volatile` apply the same way to a run made now and to a
``run --json`` saved before a rule was added. A few rules only a comparison *between bridges*
needs read the steps on the way (docs/drift.md, "What else is compared, and how"):

* **Start-up is pooled.** The steps before the first agent-facing step (``load``,
  ``event session_start``, ``settle``, ``sleep``) register tools and commands, and may inject,
  toast or call the palace; *which* of them does it is each bridge's choice (the reference
  connects at load, pi's client at session_start) and no agent sees the difference. It is
  compared once, tools and commands in order, as the pseudo-step ``(start-up)`` after them. A
  registration later than that stays where it happened.
* **A settle or sleep joins the step before it** for effects and wire calls (:func:`groups`);
  process facts are compared over the whole run, as ``(whole run)``.
* **Subscriptions are not behaviour.** ``load``'s ``events`` list is dropped.
* **Errors are compared by kind and code**, and by message and data only when the palace wrote
  them (``tool_error``, TOOL-04); any other message is each bridge's own prose.
* **Capabilities only one side declares are masked** (:class:`Masks`), and so are UI-only effects
  unless asked for.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from palace_conformance.contract import MAILBOX_TYPE, WAKEUP_TYPE, call_outcomes
from palace_conformance.runner.compare.categories import (
    CATEGORIES,
    ERRORS,
    PROCESSES,
    REGISTRATIONS,
    UI,
    UI_ONLY_EFFECTS,
    WIRE,
    effect_category,
    result_category,
)
from palace_conformance.runner.compare.observed import (
    requests,
    unpaced,
    whole_run,
    with_late_calls,
)
from palace_conformance.runner.compare.volatile import (
    ERROR_KIND_RULES,
    REAL_SERVER_TEXT_RULES,
    ErrorKindRule,
    Masker,
    run_dates,
)
from palace_conformance.runner.results import ScenarioResult, StepRecord
from palace_conformance.runner.verdict.normalise import replacement_list

STARTUP_KEY = "(start-up)"
RUN_KEY = "(whole run)"
STARTUP_OPS = frozenset({"load", "settle", "sleep"})
STARTUP_EVENTS = frozenset({"session_start"})
#: ops that join the step before them (:func:`groups`)
JOINING_OPS = frozenset({"settle", "sleep"})
#: the palace tools only feeding calls (masked with its helper runs when feeding is one-sided)
FEEDING_TOOLS = frozenset({"mempalace_mine"})
_REGISTRATION_KINDS = frozenset({"tool_registered", "command_registered"})
#: the fields of an effect compared, by kind (any other kind: all of them)
_EFFECT_FIELDS: Mapping[str, tuple[str, ...]] = {
    "tool_registered": ("name",), "command_registered": ("name",),
    "message": ("custom_type", "content", "deliver_as", "trigger_turn"),
    "user_message": ("content", "deliver_as"), "injected": ("custom_type",),
    "error": ("where",), "exec": ("argv", "exit_code", "timed_out"),
    "notify": ("level", "message")}
#: the fields compared of each journal record that is a process fact (categories.PROCESS_RECORDS)
PROCESS_FIELDS: Mapping[str, tuple[str, ...]] = {
    "process_start": ("transport",), "process_exit": ("transport", "code", "reason"),
    "signal": ("transport", "signal", "action"), "helper_run": ("name", "argv")}
#: ... and those a full observation (:attr:`Masks.full`, the golden traces) adds: a process's
#: whole argv and the environment keys the kit cares about, a helper's working directory
FULL_PROCESS_FIELDS: Mapping[str, tuple[str, ...]] = {
    **PROCESS_FIELDS, "process_start": ("transport", "argv", "env"),
    "helper_run": ("name", "argv", "cwd", "env"),
    "cli_run": ("command", "argv", "exit_code")}


@dataclass(frozen=True)
class Masks:
    """What is left out of both traces: what only one side declares, and UI-only effects."""

    commands: bool = False
    custom_types: frozenset[str] = frozenset()
    feeding: bool = False  # the helper runs and mempalace_mine calls of feeding
    ui: bool = True  # UI-only effects (notify) left out; --include-ui compares them
    real_server: bool = False  # a side ran against the real server: its minted ids' random part
    #: the catalogue tools both sides can offer when a side's profile maps a curated set (its
    #: ``tools.map``): registrations of any other tool are left out; None: every tool compared
    offered: frozenset[str] | None = None
    #: observe everything (the golden traces, fixtures/README.md): every request's head and body,
    #: every process's argv and environment, every registration and effect whole
    full: bool = False

    @classmethod
    def between(cls, left: Iterable[str], right: Iterable[str], *,
                include_ui: bool = False, real_server: bool = False,
                offered: tuple[frozenset[str] | None, frozenset[str] | None] = (None, None)
                ) -> Masks:
        a, b = set(left), set(right)
        sets = [o for o in offered if o is not None]
        common = frozenset.intersection(*sets) if sets else None

        def one_sided(capability: str) -> bool:
            return (capability in a) != (capability in b)

        types = {t for cap, t in (("wakeup", WAKEUP_TYPE), ("mailbox", MAILBOX_TYPE))
                 if one_sided(cap)}
        return cls(commands=one_sided("diary_command"), custom_types=frozenset(types),
                   feeding=one_sided("feeding"), ui=not include_ui, real_server=real_server,
                   offered=common)

    def describe(self) -> list[str]:
        """The capability masks (the UI mask is named by the report, with what it hid)."""
        out = []
        if self.commands:
            out.append("registered commands (only one side has diary_command, declared or "
                       "detected)")
        for custom in sorted(self.custom_types):
            capability = "wakeup" if custom == WAKEUP_TYPE else "mailbox"
            out.append(f"{custom} messages (only one side has {capability}, declared or detected)")
        if self.feeding:
            out.append("helper runs (exec effects, helper_run records) and "
                       f"{', '.join(sorted(FEEDING_TOOLS))} calls (only one side has feeding, "
                       "declared or detected)")
        if self.real_server:
            out.append("the random part of the real server's event ids (run against the real "
                       "server)")
        if self.offered is not None:
            out.append(f"registrations of tools outside the {len(self.offered)} a profile maps "
                       "(registrations are compared as sets of catalogue names, after the map)")
        return out

    def hides(self, effect: Mapping[str, Any]) -> bool:
        kind = str(effect.get("kind"))
        if self.ui and kind in UI_ONLY_EFFECTS:
            return True
        if self.commands and kind == "command_registered":
            return True
        if (self.offered is not None and kind == "tool_registered"
                and effect.get("name") not in self.offered):
            return True
        if self.feeding and kind == "exec":
            return True
        return effect.get("custom_type") in self.custom_types

    def hides_record(self, record: Mapping[str, Any]) -> bool:
        """A journal record left out: feeding's helper runs and mine calls, when one-sided."""
        if not self.feeding:
            return False
        return record.get("kind") == "helper_run" or (
            record.get("method") == "tools/call" and record.get("tool") in FEEDING_TOOLS)


def run_replacements(result: ScenarioResult) -> list[tuple[str, str]]:
    """The run's own temp dir and fake URL, read back from its reported environment (a saved
    result keeps only that: ``HOME`` = ``${TMP}/home``, the URL the bridge was given)."""
    values: dict[str, str] = {}
    home = result.env.get("HOME")
    if home and PurePosixPath(home).name == "home":
        values["TMP"] = str(PurePosixPath(home).parent)
    url = result.env.get("MEMPALACE_REMOTE_URL")
    if url:
        values["FAKE_URL"] = url
    return replacement_list(values)


def startup_keys(steps: Sequence[StepRecord]) -> list[str]:
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


def ui_effects(result: ScenarioResult) -> int:
    """How many UI-only effects a run had (what the UI mask hides, for the report)."""
    return sum(1 for step in result.steps if step.index >= 0 for effect in step.effects
               if effect.get("kind") in UI_ONLY_EFFECTS)


def groups(steps: Sequence[StepRecord]) -> dict[str, str]:
    """Step key -> the key its effects and wire calls are compared under.

    The start-up steps pool under ``(start-up)``; a ``settle`` or ``sleep`` joins the step before
    it, since what it collects (asynchronous effects, a poll a handler started) is that step's
    doing, and whether it lands before or after the step returned is timing, not behaviour."""
    startup = set(startup_keys(steps))
    found: dict[str, str] = {}
    head: str | None = None
    for step in steps:
        if step.key in startup:
            found[step.key] = STARTUP_KEY
        elif step.op in JOINING_OPS and head is not None:
            found[step.key] = head
        else:
            head = step.key
            found[step.key] = head
    return found


def drift_trace(result: ScenarioResult, masks: Masks = Masks(), *, started_at: str = "",
                journal: bool = True) -> dict[str, Any]:
    """``{category: {"steps": {key: fragment}}}``: every step in every category, so both sides
    line up key by key (:func:`groups` says where effects and wire calls go).

    ``journal=False`` leaves the journal facts out (a side read from a saved result has none)."""
    masker = Masker(run_replacements(result), run_dates(started_at or None),
                    REAL_SERVER_TEXT_RULES if masks.real_server else ())
    steps = sorted((s for s in result.steps if s.index >= 0), key=lambda s: s.index)
    group_of = groups(steps)
    pools: dict[str, dict[str, dict[str, Any]]] = {}
    tools: list[str] = []
    commands: list[str] = []
    #: with ``masks.full``: each start-up registration whole, by name (its last registration)
    whole: dict[str, dict[str, Any]] = {}
    own: dict[str, dict[str, dict[str, Any]]] = {}
    active: list[ErrorKindRule] = []
    for step in steps:
        fragments: dict[str, dict[str, Any]] = {c.name: {} for c in CATEGORIES}
        fragments[ERRORS].update(_errors(step, masker, active))
        value = masker.value(step.result)
        if step.op == "load" and isinstance(value, dict):
            value.pop("events", None)
            if group_of[step.key] == STARTUP_KEY:
                tools += [str(t) for t in value.pop("tools", None) or ()]
                commands += [str(c) for c in value.pop("commands", None) or ()]
            value = value or None
        fragments[result_category(step.op)]["result"] = _result_view(step.op, value, masks)
        own[step.key] = fragments
        pool = pools.setdefault(group_of[step.key], {c.name: {"effects": []} for c in CATEGORIES})
        for effect in step.effects:
            category = effect_category(str(effect.get("kind")))
            if category is None or masks.hides(effect):
                continue
            if group_of[step.key] == STARTUP_KEY and effect.get("kind") in _REGISTRATION_KINDS:
                names = tools if effect.get("kind") == "tool_registered" else commands
                names.append(str(effect.get("name")))
                if masks.full:
                    whole[f"{effect.get('kind')}:{effect.get('name')}"] = _effect(
                        effect, masker, full=True)
                continue
            pool[category]["effects"].append(_effect(effect, masker, full=masks.full))
        active += [rule for rule in ERROR_KIND_RULES
                   if rule not in active and rule.triggered_by(step.op, step.request)]
    views_run, wire_run = _journal_views(result, steps, group_of, pools, masker, masks) \
        if journal else (None, None)
    if masks.offered is not None:
        tools = [name for name in tools if name in masks.offered]
    # sets (name -> true): a missing or extra name is named; the order is the order check's
    registrations: dict[str, Any] = {"tools": {
        name: whole.get(f"tool_registered:{name}", True) for name in sorted(tools)}}
    if not masks.commands:
        registrations["commands"] = {name: whole.get(f"command_registered:{name}", True)
                                     for name in sorted(commands)}
    if masks.full:  # the order the agent sees them in is owed too
        registrations["order"] = {"tools": tools, "commands": commands}
    views: dict[str, dict[str, Any]] = {c.name: {} for c in CATEGORIES}
    last_startup = max((k for k, g in group_of.items() if g == STARTUP_KEY),
                       key=list(group_of).index, default=None)
    for step in steps:
        for name, fragment in own[step.key].items():
            if group_of[step.key] == step.key:
                fragment.update(pools[step.key][name])
            views[name][step.key] = fragment
        if step.key == last_startup:
            for name, view in views.items():
                view[STARTUP_KEY] = pools[STARTUP_KEY][name]
            views[REGISTRATIONS][STARTUP_KEY].update(registrations)
    if views_run is not None:
        views[PROCESSES][RUN_KEY] = views_run
        if masks.full:
            views[WIRE][RUN_KEY] = wire_run
    if masks.ui:
        views[UI] = {}
    return {name: {"steps": view} for name, view in views.items()}


def _journal_views(result: ScenarioResult, steps: Sequence[StepRecord],
                   group_of: Mapping[str, str], pools: dict[str, dict[str, dict[str, Any]]],
                   masker: Masker, masks: Masks) -> tuple[dict[str, Any], Any]:
    """The journal's facts: each window's wire calls put in ``pools`` (and with ``masks.full``
    its requests), and the run's own views: its process facts, and with ``masks.full`` its
    wire seen whole (None without)."""
    wire_run: Any = None
    # a hidden record becomes {}: every step's window (record indexes) stays as it was
    journal_kept = [{} if masks.hides_record(r) else r for r in result.journal]
    windows = _journal_windows(steps, group_of, journal_kept)
    if masks.full:  # a timed-out call's request is its step's, read late or not
        windows = with_late_calls(windows, {
            group_of[step.key]: str(step.request.get("name")) for step in steps
            if step.ran and step.op == "call_tool" and isinstance(step.error, dict)
            and step.error.get("kind") == "timeout"})
    seen: list[list[dict[str, Any]]] = []
    by_window = requests(windows, masker) if masks.full else {}
    for key, records in windows.items():
        pools[key][WIRE]["calls"] = _calls(records, masker)
        if masks.full:
            seen.append(by_window.get(key, []))
            pools[key][WIRE]["requests"] = [r for r in seen[-1] if unpaced(r) is None]
    children = _children(journal_kept)
    if masks.full:
        # which step's window a late exit or signal falls in is the machine's load: the
        # facts of a full observation are the whole run's, in a stable order
        killed = _killed_unheard(journal_kept)
        facts = [fact for records in windows.values()
                 for fact in _process_records([r for r in records if r.get("pid") not in killed
                                               or not _ignored_signal(r)],
                                              masker, "", children, FULL_PROCESS_FIELDS)]
        views_run = {"journal": sorted(facts, key=lambda fact: json.dumps(
            fact, sort_keys=True, default=str))}
        wire_run = whole_run(seen)
    else:
        views_run = {"journal": [fact for key, records in windows.items()
                                 for fact in _process_records(records, masker, key,
                                                              children)]}
    return views_run, wire_run


def _ignored_signal(record: Mapping[str, Any]) -> bool:
    return record.get("kind") == "signal" and record.get("action") == "ignored"


def _killed_unheard(journal: Sequence[Mapping[str, Any]]) -> set[Any]:
    """Pids of palaces deaf to SIGTERM that never exited on their own (SIGKILL ended them: no
    ``process_exit``). Whether such a child journalled the SIGTERM it ignored is the clock's
    when the kill follows at once (a 1 ms grace on a loaded machine), so a full observation
    leaves those records out; the fixtures' ``processes.signals`` judge the SIGTERM itself."""
    exited = {r.get("pid") for r in journal if r.get("kind") == "process_exit"}
    return {r.get("pid") for r in journal if _ignored_signal(r) and r.get("pid") not in exited}


def _result_view(op: str, value: Any, masks: Masks) -> Any:
    """A step's masked result as compared: a batch's durations dropped, a listing sorted (the
    tools a profile does not offer left out), the UI messages ``masks`` hides left out."""
    if op == "call_tools" and isinstance(value, dict):
        value = without_durations(value)
    if op == "list_tools" and isinstance(value, list):
        value = sorted((t for t in value if not isinstance(t, dict) or masks.offered is None
                        or t.get("name") in masks.offered),
                       key=lambda t: json.dumps(t, sort_keys=True, default=str))
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value["messages"] = [
            m for m in value["messages"]
            if not (isinstance(m, dict) and m.get("custom_type") in masks.custom_types)]
    return value


def _errors(step: StepRecord, masker: Masker,
            active: Sequence[ErrorKindRule]) -> dict[str, Any]:
    out: dict[str, Any] = {"ok": step.ok}
    if not step.ran:
        out["ran"] = False
    if step.failure is not None:
        out["failure"] = masker.text(step.failure)
    error = step.error
    if isinstance(error, dict):
        kind = error.get("kind")
        kept: dict[str, Any] = {}
        if kind is not None:
            merged = str(kind)
            for rule in active:
                merged = rule.merge(merged)
            kept["kind"] = merged
        if "code" in error:
            kept["code"] = error["code"]
        if kind == "tool_error":
            for name in ("message", "data"):
                if error.get(name) is not None:
                    kept[name] = masker.value(error[name])
        out["error"] = kept
    return out


def _effect(effect: Mapping[str, Any], masker: Masker, *, full: bool = False) -> dict[str, Any]:
    """The compared fields of an effect (``full``: all of them)."""
    kind = str(effect.get("kind"))
    fields = (None if full else _EFFECT_FIELDS.get(kind)) or tuple(k for k in effect
                                                                   if k != "kind")
    return {"kind": kind, **{name: masker.value(effect[name], name) for name in fields
                             if name in effect}}


def _journal_windows(steps: Sequence[StepRecord], group_of: Mapping[str, str],
                     journal: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Each group's journal records: from its first step's start to the next group's (what a
    step set going, even after it returned, is its own), the last group's to the end. Records
    before the first step are the runner's setup and belong to none."""
    starts: dict[str, int] = {}
    for step in steps:
        if step.ran:
            starts.setdefault(group_of[step.key], step.journal_start)
    ordered = sorted(starts.items(), key=lambda item: item[1])
    windows: dict[str, list[Mapping[str, Any]]] = {}
    for position, (key, start) in enumerate(ordered):
        end = ordered[position + 1][1] if position + 1 < len(ordered) else len(journal)
        windows[key] = list(journal[start:max(end, start)])
    return windows


def _calls(records: Iterable[Mapping[str, Any]], masker: Masker) -> list[dict[str, Any]]:
    """The ``tools/call`` requests the palace received: tool and arguments, sorted (calls a
    bridge makes concurrently reach the palace in either order)."""
    calls = []
    for record in records:
        if record.get("kind") != "recv" or record.get("method") != "tools/call":
            continue
        message = record.get("message")
        params = message.get("params") if isinstance(message, dict) else None
        arguments = params.get("arguments") if isinstance(params, dict) else None
        calls.append({"tool": record.get("tool"), "arguments": masker.value(arguments)})
    return sorted(calls, key=lambda call: json.dumps(call, sort_keys=True, default=str))


def _children(journal: Sequence[Mapping[str, Any]]) -> dict[Any, int]:
    """pid -> 1, 2, ...: each stdio child by the order it started in (a pid is per run)."""
    order: dict[Any, int] = {}
    for record in journal:
        if record.get("kind") == "process_start" and record.get("pid") not in order:
            order[record.get("pid")] = len(order) + 1
    return order


def _process_records(records: Iterable[Mapping[str, Any]], masker: Masker, step: str = "",
                     children: Mapping[Any, int] | None = None,
                     compared: Mapping[str, tuple[str, ...]] = PROCESS_FIELDS
                     ) -> list[dict[str, Any]]:
    """Process facts of one step's window, each saying which step and which child (by start
    order), sorted within the step: two children exiting together may journal in either
    order."""
    facts = []
    for record in records:
        fields = compared.get(str(record.get("kind")))
        if fields is None:
            continue
        fact = {"kind": record["kind"], **{name: masker.value(record[name], name)
                                           for name in fields if name in record}}
        if step:
            fact["step"] = step
        if children is not None and record.get("pid") in children:
            fact["child"] = children[record.get("pid")]
        facts.append(fact)
    return sorted(facts, key=lambda fact: sorted((k, str(v)) for k, v in fact.items()))


def without_durations(result: dict[str, Any]) -> dict[str, Any]:
    """A ``call_tools`` result without each call's ``ms``: a duration is no drift."""
    calls = call_outcomes(result)
    if calls is None:
        return result
    return {**result, "calls": [{k: v for k, v in call.items() if k != "ms"}
                                if isinstance(call, dict) else call for call in calls]}


def squash(value: Any) -> Any:
    """``{}``, ``null`` and an absent key as one value: dict entries that are (or become)
    empty or null are dropped, at every depth. A bridge's ``details: {}`` against another's
    ``null`` says nothing an agent can tell apart."""
    if isinstance(value, dict):
        kept = {k: squash(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v != {}}
    if isinstance(value, list):
        return [squash(v) for v in value]
    return value
