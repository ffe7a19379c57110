"""Evaluate a scenario's checks over a stream of records (journal lines, or effects).

The checks are the format's whole vocabulary for "what happened": ``sequence`` (ordered
subsequence), ``count``, ``absent``, ``order``, ``distinct`` and ``gap``. Each evaluation returns a
verdict with a sentence a person can act on, because a red check that does not say why wastes the
time the suite was meant to save.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from palace_conformance import json_pointer
from palace_conformance.scenarios.matching import MISSING, json_equal, matches, why_not
from palace_conformance.scenarios.model import Check, ProcessesExpect, Timing, ToolsExpect

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Verdict:
    passed: bool
    detail: str


#: an array index as RFC 6901 writes it: ``0`` or digits without a leading zero (``01`` is none)
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer, or :data:`~.matching.MISSING`.

    Strict on array indexes (``/items/01``, ``/items/-`` and ``/items/+1`` resolve to nothing), so
    every language resolves a pointer to the same value or to none.
    """
    if pointer == "":
        return document
    current = document
    for raw in pointer.split("/")[1:]:
        token = json_pointer.unescape(raw)
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif (isinstance(current, list) and _ARRAY_INDEX.fullmatch(token)
              and int(token) < len(current)):
            current = current[int(token)]
        else:
            return MISSING
    return current


def _brief(record: Record, limit: int = 160) -> str:
    text = json.dumps(record, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _indices(records: Sequence[Record], matcher: Any) -> list[int]:
    return [i for i, r in enumerate(records) if matches(matcher, r)]


#: the machine's lateness over a window of monotonic seconds, in ms (a run's timer probe)
Lateness = Callable[[float, float], int]


def evaluate(check: Check, records: Sequence[Record], *, slack_factor: float = 1.0,
             lateness: Lateness | None = None, start_allowance_ms: int = 0) -> Verdict:
    """Judge one check against records in stream order (``slack_factor`` widens a gap's slack;
    ``lateness`` adds what the machine's wake-ups lost during the gap to its upper bound;
    ``start_allowance_ms``, the palace server's own start, is added to a gap across a palace
    start: :func:`palace_started`)."""
    raw = check.raw
    kind = check.kind
    if kind == "sequence":
        return _sequence(raw["items"], records)
    if kind == "count":
        found = len(_indices(records, raw["match"]))
        bounds = check.bounds
        return Verdict(bounds.admits(found),
                       f"{found} matching record(s); expected {bounds.describe()}")
    if kind == "absent":
        hits = _indices(records, raw["match"])
        if hits:
            first = hits[0]
            return Verdict(False, f"record #{first} should not be there: {_brief(records[first])}")
        return Verdict(True, "no matching record")
    if kind == "order":
        return _order(raw, records)
    if kind == "distinct":
        values: list[Any] = []  # distinct as matchers see it: 1 and 1.0 are one value
        for index in _indices(records, raw["match"]):
            value = resolve_pointer(records[index], raw["field"])
            if value is not MISSING and not any(json_equal(value, seen) for seen in values):
                values.append(value)
        bounds = check.bounds
        return Verdict(bounds.admits(len(values)),
                       f"{len(values)} distinct value(s) at {raw['field']}; "
                       f"expected {bounds.describe()}")
    if kind == "gap":
        return _gap(raw, records, slack_factor, lateness, start_allowance_ms)
    raise ValueError(f"unknown check {kind!r}")


def _sequence_miss(item: Any, records: Sequence[Record], start: int) -> str:
    """Why ``item`` has no match from ``start`` on: a match before it, or the closest record
    after it (a record that matches is never the "closest miss")."""
    early = next((i for i in range(start) if matches(item, records[i])), None)
    misses = [why for r in records[start:] if (why := why_not(item, r))]
    closest = f" (closest miss: {min(misses, key=len)})" if misses else " (no records after them)"
    if early is None:
        return closest
    return f"; record #{early} matches it but comes before them{closest}"


def _sequence(items: Sequence[Any], records: Sequence[Record]) -> Verdict:
    position = 0
    for number, item in enumerate(items, 1):
        start = position
        while position < len(records) and not matches(item, records[position]):
            position += 1
        if position == len(records):
            return Verdict(False, f"item {number} of {len(items)} not found after the earlier "
                                  f"ones{_sequence_miss(item, records, start)}")
        position += 1
    return Verdict(True, f"all {len(items)} item(s) found in order")


def _order(raw: Mapping[str, Any], records: Sequence[Record]) -> Verdict:
    firsts = _indices(records, raw["first"])
    thens = _indices(records, raw["then"])
    if raw.get("then_required", True) and not thens:
        return Verdict(False, "no record matches 'then', so the order cannot be shown")
    if not firsts:
        if thens:
            return Verdict(False, f"record #{thens[0]} matches 'then' but no record matches "
                                  f"'first': {_brief(records[thens[0]])}")
        return Verdict(True, "neither 'first' nor 'then' records (allowed: then_required false)")
    anchor = firsts[-1] if raw.get("after", "first") == "last" else firsts[0]
    early = [i for i in thens if i <= anchor]
    if early:
        return Verdict(False, f"record #{early[0]} comes before 'first' (#{anchor}): "
                              f"{_brief(records[early[0]])}")
    return Verdict(True, f"{len(thens)} 'then' record(s) after 'first' (#{anchor})")


def _is_time(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: what a start allowance is, in a bound's words
START_ALLOWANCE = "the real server's measured start"


def palace_started(records: Sequence[Record]) -> bool:
    """Whether a palace started among ``records``: a child's ``process_start``, or the
    ``initialize`` it was sent (a real server's start runs until it answers that)."""
    return any(r.get("kind") == "process_start"
               or (r.get("kind") == "recv" and r.get("method") == "initialize")
               for r in records)


def start_allowance(records: Sequence[Record], measured_ms: int) -> int:
    """What a bound across ``records`` gets for a palace's start: nothing when none started
    among them or the server has no start of its own (the fake: ``measured_ms`` 0); else the
    larger of the run's measured start and the longest the relay saw a real server of these
    records take to answer ``initialize`` (its ``server_start`` records: the load now, not at
    the run's beginning)."""
    if not measured_ms or not palace_started(records):
        return 0
    seen = [r["ms"] for r in records if r.get("kind") == "server_start" and _is_time(r.get("ms"))]
    return int(max([measured_ms, *(round(ms) for ms in seen)]))


def _gap(raw: Mapping[str, Any], records: Sequence[Record], slack_factor: float = 1.0,
         lateness: Lateness | None = None, start_allowance_ms: int = 0) -> Verdict:
    nth = raw.get("from_nth", 1)
    starts = _indices(records, raw["from"])
    if len(starts) < nth:
        return Verdict(False, f"only {len(starts)} record(s) match 'from'; need #{nth}")
    start = starts[nth - 1]
    end = next((i for i in range(start + 1, len(records)) if matches(raw["to"], records[i])), None)
    if end is None:
        return Verdict(False, f"no record matches 'to' after 'from' #{nth} (record #{start})")
    t0, t1 = records[start].get("t"), records[end].get("t")
    if not _is_time(t0) or not _is_time(t1):
        return Verdict(False, "records carry no 't' timestamp (gap works on the journal only)")
    created = records[end].get("created_t")
    # a process start is the bridge's spawn: measure to the process's creation (the latest it
    # can have been), not to its interpreter's first record; never later than that record
    spawned = False
    if _is_time(created) and created < t1:
        t1, spawned = created, True
    timing = Timing.from_json(raw["ms"])
    elapsed = (t1 - t0) * 1000.0
    to = f"#{end}'s creation" if spawned else f"#{end}"
    # a child measured to its creation has not started yet; any other record it spans has
    across = records[start:end] if spawned else records[start:end + 1]
    allowance = start_allowance(across, start_allowance_ms)
    late = lateness(t0, t1) if lateness is not None and timing.slack_ms is not None else 0
    bounds = timing.describe(slack_factor, allowance, late_ms=late, allowance=START_ALLOWANCE)
    return Verdict(timing.admits(elapsed, slack_factor, allowance, late_ms=late),
                   f"{elapsed:.0f} ms from record #{start} to {to}; expected {bounds}")


# --- tools, processes, secrets ------------------------------------------------------------


def evaluate_tools(expect: ToolsExpect, tools: Sequence[Mapping[str, Any]],
                   catalogue: Sequence[Mapping[str, Any]]) -> list[Verdict]:
    """Judge registered tools (``{name, parameters|inputSchema}``) against a ``tools`` block."""
    names = [str(t.get("name")) for t in tools]
    reference = [str(t["name"]) for t in catalogue]
    verdicts: list[Verdict] = []
    registered = expect.registered
    if registered == "none":
        verdicts.append(Verdict(not names, f"{len(names)} tool(s) registered; expected none"))
    elif registered is not None:
        wanted = reference if registered == "catalogue" else list(registered)
        missing = sorted(set(wanted) - set(names))
        extra = sorted(set(names) - set(wanted))
        dupes = sorted({n for n in names if names.count(n) > 1})
        ok = not (missing or extra or dupes)
        detail = (f"missing {missing[:5]}, unexpected {extra[:5]}, repeated {dupes[:5]}"
                  if not ok else "registered tools match")
        verdicts.append(Verdict(ok, detail))
    if expect.includes:
        missing = [n for n in expect.includes if n not in names]
        verdicts.append(Verdict(not missing, f"missing {missing}" if missing else "all included"))
    if expect.excludes:
        present = [n for n in expect.excludes if n in names]
        verdicts.append(Verdict(not present, f"should be absent: {present}" if present
                                else "none of the excluded tools"))
    if expect.schemas == "catalogue":
        schemas = {str(t["name"]): t.get("inputSchema") for t in catalogue}
        changed = [str(t.get("name")) for t in tools
                   if not json_equal(t.get("parameters", t.get("inputSchema")),
                                     schemas.get(str(t.get("name"))))]
        verdicts.append(Verdict(not changed, f"schemas differ from the catalogue for {changed[:5]}"
                                if changed else "every schema equals the catalogue's"))
    if expect.order == "catalogue":
        order = [n for n in reference if n in names]
        seen = [n for n in names if n in reference]
        verdicts.append(Verdict(seen == order, "catalogue order" if seen == order else
                                "tools are not in catalogue order"))
    return verdicts


def process_facts(journal: Sequence[Record],
                  alive: Callable[[int], bool]) -> dict[str, Any]:
    """What the journal (plus a liveness probe) says about the stdio children of a run.

    Only children count (``process_start`` of transport stdio): the HTTP fake is the runner's;
    ``alive`` also counts what they started that is still running (``descendant_start``).
    A child that left no ``process_exit`` record and is gone was SIGKILLed: the fake journals
    every other way it can end. The runner takes these facts right after the last step, before
    the host's exit, so a child only that exit or the cleanup ends counts as alive.
    """
    pids = [r["pid"] for r in journal
            if r.get("kind") == "process_start" and r.get("transport") == "stdio"]
    children = set(pids)
    exited = {r["pid"] for r in journal if r.get("kind") == "process_exit"}
    signals: dict[str, int] = {}
    for record in journal:
        if record.get("kind") == "signal" and record.get("pid") in children:
            name = str(record.get("signal"))
            signals[name] = signals.get(name, 0) + 1
    living = [pid for pid in pids if alive(pid)]
    silent = [pid for pid in pids if pid not in exited and pid not in living]
    if silent:
        signals["SIGKILL"] = signals.get("SIGKILL", 0) + len(silent)
    # what the children started (fault spawn_grandchild) must not outlive them: it counts as alive
    return {"spawned": len(pids), "signals": signals,
            "alive": len(living) + len(live_descendants(journal, alive))}


def live_descendants(journal: Sequence[Record], alive: Callable[[int], bool]) -> list[int]:
    """Pids of the processes the children started (``descendant_start``) still running, but
    those that left the child's process group (``left_group: true``): no bridge can reach one
    (docs/choices.md), so it is no orphan of the bridge's; the runner kills it at cleanup."""
    children = {r["pid"] for r in journal
                if r.get("kind") == "process_start" and r.get("transport") == "stdio"}
    descendants = {r["pid"] for r in journal if r.get("kind") == "descendant_start"
                   and isinstance(r.get("pid"), int) and r["pid"] not in children
                   and r.get("left_group") is not True}
    return sorted(pid for pid in descendants if alive(pid))


def evaluate_processes(expect: ProcessesExpect, facts: Mapping[str, Any]) -> list[Verdict]:
    """Judge :func:`process_facts` (taken after the last step) against a ``processes`` block."""
    verdicts = []
    if expect.spawned is not None:
        verdicts.append(Verdict(expect.spawned.admits(facts["spawned"]),
                                f"{facts['spawned']} stdio child(ren) spawned; expected "
                                f"{expect.spawned.describe()}"))
    for name, bounds in expect.signals.items():
        got = facts["signals"].get(name, 0)
        verdicts.append(Verdict(bounds.admits(got),
                                f"{name} x{got}; expected {bounds.describe()}"))
    if expect.alive_after_shutdown is not None:
        verdicts.append(Verdict(facts["alive"] == expect.alive_after_shutdown,
                                f"{facts['alive']} fake process(es) alive after "
                                f"{facts.get('after', 'shutdown')}; expected "
                                f"{expect.alive_after_shutdown}"))
    return verdicts


def leaked_secrets(secrets: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The secrets found in any of ``texts`` (journal file, effects as JSON, stderr, argv)."""
    return [s for s in secrets if any(s in text for text in texts)]
