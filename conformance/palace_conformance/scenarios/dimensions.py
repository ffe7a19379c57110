"""Situations as dimensions: what each scenario's env, steps, helpers and faults put a bridge in.

The vocabulary is data (``fixtures/dimensions.json``): every seed knob with its kind, and the
situations a catalogue owes (feature pairs, failure sequences, concurrency, ...). Each cell is
*derived* from what a scenario already does, never from its id or title:

* a knob's value class comes from ``env`` (names in ``env_pace`` only set the pace and do not
  count); ``unset`` is an absence, so a scenario that asserts a default says so in
  ``dimensions.defaults`` (schema-checked), or sets the knob to ``null`` or blank;
* a situation comes from the scenario's transports, env, helpers, faults (armed from the start or
  by a ``server`` step) and steps (fixtures/README.md, Dimensions).

``fixtures coverage --dimensions`` prints the table this module computes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palace_conformance.resources import fixtures_dir
from palace_conformance.scenarios.model import Scenario

#: the value classes owed per knob kind, in column order
CLASSES: Mapping[str, tuple[str, ...]] = {
    "integer": ("unset", "zero", "edge", "malformed"),
    "flag": ("unset", "zero", "malformed"),
    "json": ("unset", "malformed"),
}
ALL_CLASSES = ("unset", "zero", "edge", "malformed")
_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")
#: an integer at or past this is an edge (a 32-bit timer's limit); so are 1 and a padded value
_HUGE = 2**31 - 1


@dataclass(frozen=True)
class Knob:
    name: str
    kind: str
    behaviours: tuple[str, ...]


@dataclass(frozen=True)
class Situation:
    id: str
    title: str


@dataclass(frozen=True)
class Vocabulary:
    knobs: tuple[Knob, ...]
    situations: tuple[Situation, ...]

    def cells(self) -> list[str]:
        """Every owed cell, in table order: ``knob.NAME.class`` then each situation id."""
        owed = [f"knob.{k.name}.{c}" for k in self.knobs for c in CLASSES[k.kind]]
        return owed + [s.id for s in self.situations]


def default_path() -> Path:
    return fixtures_dir() / "dimensions.json"


def load_vocabulary(path: Path | None = None) -> Vocabulary:
    data = json.loads((path or default_path()).read_text(encoding="utf-8"))
    knobs = tuple(Knob(k["name"], k["kind"], tuple(k["behaviours"])) for k in data["knobs"])
    situations = tuple(Situation(s["id"], s["title"]) for s in data["situations"])
    return Vocabulary(knobs, situations)


def knob_class(kind: str, raw: str | None) -> str | None:
    """The value class of one knob's value, or ``None`` for an ordinary value (no cell)."""
    if raw is None or raw.strip() == "":
        return "unset"
    text = raw.strip()
    if kind == "flag":
        if text in _OFF:
            return "zero"
        return None if text in _ON else "malformed"
    if kind == "json":
        return None if _preamble_shaped(text) else "malformed"
    try:
        value = int(text)
    except ValueError:
        return "malformed"
    if value < 0:
        return "malformed"
    if value == 0:
        return "zero"
    return "edge" if value == 1 or value >= _HUGE or text != raw else None


def _preamble_shaped(text: str) -> bool:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return (isinstance(data, dict) and isinstance(data.get("tool"), str) and bool(data["tool"])
            and isinstance(data.get("arguments", {}), dict))


def knob_cells(scenario: Scenario, vocabulary: Vocabulary) -> set[str]:
    found: set[str] = set()
    kinds = {k.name: k.kind for k in vocabulary.knobs}
    for name, raw in scenario.env.items():
        if name in kinds and name not in scenario.env_pace:
            value_class = knob_class(kinds[name], raw)
            if value_class in CLASSES[kinds[name]]:
                found.add(f"knob.{name}.{value_class}")
    declared = (scenario.raw.get("dimensions") or {}).get("defaults", ())
    found.update(f"knob.{name}.unset" for name in declared if name in kinds)
    return found


# --- situations -------------------------------------------------------------------------------


def _events(scenario: Scenario, name: str) -> int:
    return sum(1 for s in scenario.steps if s.op == "event" and s.params.get("name") == name)


def _faults(scenario: Scenario) -> list[Mapping[str, Any]]:
    faults = list(scenario.raw.get("faults", ()))
    for step in scenario.raw.get("steps", ()):
        if step.get("op") == "server" and step.get("action") == "arm":
            faults.extend(step.get("faults", ()))
    return [f for f in faults if isinstance(f, Mapping)]


def _faulted_tools(scenario: Scenario) -> set[str]:
    return {f["on"]["tool"] for f in _faults(scenario)
            if isinstance(f.get("on"), Mapping) and isinstance(f["on"].get("tool"), str)}


def _off(scenario: Scenario, name: str) -> bool:
    return knob_class("flag", scenario.env.get(name)) == "zero"


def _set(scenario: Scenario, name: str) -> bool:
    raw = scenario.env.get(name)
    return raw is not None and raw.strip() != ""


def _feed_helper(scenario: Scenario) -> Mapping[str, Any] | None:
    feed = (scenario.raw.get("helpers") or {}).get("feed")
    return feed if isinstance(feed, Mapping) else None


def feeding(scenario: Scenario) -> bool:
    return _feed_helper(scenario) is not None and not _off(scenario, "MEMPALACE_FEED")


def mailbox(scenario: Scenario) -> bool:
    """The mailbox's gates hold on some transport: a device, a remote palace, not switched off."""
    return (_set(scenario, "MEMPALACE_PI_DEVICE") and "http" in scenario.transports
            and not _off(scenario, "MEMPALACE_MAILBOX"))


def _call_steps(scenario: Scenario) -> int:
    return sum(1 for s in scenario.steps if s.op in ("call_tool", "call_tools"))


def _feed_failure(scenario: Scenario) -> bool:
    helper = _feed_helper(scenario) or {}
    timed_out = bool(helper.get("delay_ms")) and _set(scenario, "MEMPALACE_FEED_PREPARE_TIMEOUT_MS")
    return (bool(helper.get("exit_code")) or bool(helper.get("kill_signal")) or timed_out
            or "mempalace_mine" in _faulted_tools(scenario)
            or bool(scenario.palace.lock_held))


def _shutdown_while_feeding(scenario: Scenario) -> bool:
    helper = _feed_helper(scenario) or {}
    if not feeding(scenario) or not helper.get("delay_ms"):
        return False
    ops = [(s.op, s.params.get("name")) for s in scenario.steps]
    settled = [i for i, op in enumerate(ops) if op == ("event", "agent_settled")]
    return any(op[0] == "shutdown" and settled and i > settled[0] for i, op in enumerate(ops))


def _second_ask(scenario: Scenario) -> bool:
    if not mailbox(scenario):
        return False
    seeded = {e.get("correlation_id") for e in scenario.raw.get("palace", {}).get("events", ())
              if isinstance(e, Mapping) and e.get("correlation_id")}
    return any(s.op == "call_tool" and s.params.get("name") == "mempalace_event_append"
               and (s.params.get("args") or {}).get("correlation_id") in seeded
               for s in scenario.steps)


_SITUATIONS: Mapping[str, Callable[[Scenario], bool]] = {
    "pair.feed+mailbox": lambda s: (feeding(s) and mailbox(s)
                                    and _events(s, "agent_settled") > 0),
    "pair.wakeup+mailbox-failure": lambda s: (mailbox(s) and _events(s, "before_agent_start") > 0
                                              and "mempalace_event_list" in _faulted_tools(s)),
    "pair.shutdown+feed-running": _shutdown_while_feeding,
    "sequence.mailbox-poll": lambda s: (mailbox(s) and "mempalace_event_list" in _faulted_tools(s)
                                        and _events(s, "agent_settled") >= 2),
    "sequence.feed": lambda s: (feeding(s) and _feed_failure(s)
                                and _events(s, "agent_settled")
                                + sum(1 for x in s.steps if x.op == "shutdown") >= 2),
    "sequence.stdio-call": lambda s: ("stdio" in s.transports and bool(_faults(s))
                                      and _call_steps(s) >= 2),
    "sequence.http-call": lambda s: ("http" in s.transports and bool(_faults(s))
                                     and _call_steps(s) >= 2),
    "mail.second-ask-on-delivered-thread": _second_ask,
    "env.device+remote+agent": lambda s: (_set(s, "MEMPALACE_PI_DEVICE") and "http" in s.transports
                                          and _set(s, "MEMPALACE_AGENT_NAME")),
    "concurrency.calls": lambda s: any(x.op == "call_tools" for x in s.steps),
    "subject.cli": lambda s: any(x.op == "cli" for x in s.steps),
    "helper.forking": lambda s: bool((_feed_helper(s) or {}).get("fork")),
}


def unknown_situations(vocabulary: Vocabulary) -> list[str]:
    """Situations the vocabulary names that this module cannot derive (a stale vocabulary)."""
    return [s.id for s in vocabulary.situations if s.id not in _SITUATIONS]


def scenario_cells(scenario: Scenario, vocabulary: Vocabulary) -> set[str]:
    """Every dimension cell one scenario covers (subject ``bridge`` only: the fake's self-tests
    put no bridge in any situation)."""
    if scenario.subject == "fake":
        return set()
    cells = knob_cells(scenario, vocabulary)
    for situation in vocabulary.situations:
        derive = _SITUATIONS.get(situation.id)
        if derive is not None and derive(scenario):
            cells.add(situation.id)
    return cells


@dataclass(frozen=True)
class Table:
    """The coverage: each owed cell with its scenarios and the behaviours they cite."""

    vocabulary: Vocabulary
    scenarios: Mapping[str, tuple[str, ...]]
    behaviours: Mapping[str, tuple[str, ...]]

    @property
    def gaps(self) -> list[str]:
        return [cell for cell in self.vocabulary.cells() if not self.scenarios[cell]]

    def by_behaviour(self) -> dict[str, dict[str, int]]:
        """Behaviour x dimension group: how many covering scenarios cite each behaviour."""
        table: dict[str, dict[str, int]] = {}
        for cell, bids in self.behaviours.items():
            group = group_of(cell)
            for bid in bids:
                row = table.setdefault(bid, {})
                row[group] = row.get(group, 0) + 1
        return dict(sorted(table.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [{"dimension": cell, "scenarios": list(self.scenarios[cell]),
                       "behaviours": list(self.behaviours[cell])}
                      for cell in self.vocabulary.cells()],
            "by_behaviour": self.by_behaviour(),
            "gaps": self.gaps,
            "covered": len(self.vocabulary.cells()) - len(self.gaps),
            "owed": len(self.vocabulary.cells()),
        }


def group_of(cell: str) -> str:
    """A cell's column in the behaviour x dimension table: the knob class, else the prefix."""
    parts = cell.split(".")
    return parts[-1] if parts[0] == "knob" else parts[0]


def build_table(scenarios: Iterable[Scenario], vocabulary: Vocabulary) -> Table:
    found: dict[str, list[Scenario]] = {cell: [] for cell in vocabulary.cells()}
    for scenario in sorted(scenarios, key=lambda s: s.id):
        for cell in scenario_cells(scenario, vocabulary):
            found.setdefault(cell, []).append(scenario)
    return Table(
        vocabulary,
        {cell: tuple(s.id for s in found[cell]) for cell in vocabulary.cells()},
        {cell: tuple(sorted({b for s in found[cell] for b in s.covers}))
         for cell in vocabulary.cells()},
    )


def markdown(table: Table) -> str:
    lines = ["## Knobs (scenarios per value class)", "",
             "| knob | behaviours | " + " | ".join(ALL_CLASSES) + " |",
             "|---|---|" + "---|" * len(ALL_CLASSES)]
    for knob in table.vocabulary.knobs:
        cells = [_count(table, f"knob.{knob.name}.{c}") if c in CLASSES[knob.kind] else "n/a"
                 for c in ALL_CLASSES]
        lines.append(f"| {knob.name} | {', '.join(knob.behaviours)} | " + " | ".join(cells) + " |")
    lines += ["", "## Situations", "", "| situation | scenarios | behaviours cited |",
              "|---|---|---|"]
    for situation in table.vocabulary.situations:
        ids = table.scenarios[situation.id]
        shown = ", ".join(ids[:3]) + (f" (+{len(ids) - 3})" if len(ids) > 3 else "")
        lines.append(f"| {situation.id}: {situation.title} | {shown or '**gap**'} | "
                     f"{', '.join(table.behaviours[situation.id]) or '-'} |")
    lines += _behaviour_rows(table)
    owed = len(table.vocabulary.cells())
    lines += ["", f"{owed - len(table.gaps)} of {owed} dimension cell(s) covered; "
              f"{len(table.gaps)} gap(s)" + (": " + ", ".join(table.gaps) if table.gaps else "")]
    return "\n".join(lines)


def _behaviour_rows(table: Table) -> list[str]:
    groups: Sequence[str] = sorted({group_of(c) for c in table.vocabulary.cells()})
    lines = ["", "## Behaviour x dimension (covering scenarios citing the behaviour)", "",
             "| behaviour | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
    for bid, row in table.by_behaviour().items():
        lines.append(f"| {bid} | " + " | ".join(str(row.get(g, "")) for g in groups) + " |")
    return lines


def _count(table: Table, cell: str) -> str:
    return str(len(table.scenarios[cell])) if table.scenarios[cell] else "**gap**"
