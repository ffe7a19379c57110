"""Pace: a scenario's speed-ups given to a bridge that has no such knob.

A scenario sets some knobs only to run fast (``env_pace``: a 50 ms respawn backoff, a 300 ms
request timeout, feeding off). A bridge whose profile says such a knob is ``fixed`` (its own
constant) or ``absent`` (no knob, no such wait) cannot be given the value, but the behaviour under
test does not depend on it: the value is dropped, and every window the value could have shortened
is widened by what the bridge's own value adds, with a declared slack. Only an *essential* value
(the behaviour under test is that knob) the bridge lacks makes a scenario not applicable
(``profile.translate_env``).

The rule, per paced knob with scenario value ``v`` and the bridge's fixed value ``b``:

- ``b > v``: each upper bound that is at least ``v`` (a window long enough to hold that wait, so
  one that may be waiting for it: a timing's ``at_least + slack_ms``, a settle's ``max_ms``, a
  ``sleep``'s ``ms``, a step's ``timeout_ms``, the runner's own op deadline) grows by
  ``repeats * (b - v) * (1 + PACE_SLACK_FRACTION) + PACE_SLACK_MS``; shorter windows (a call
  that must fail "at once", long before a 5 s timeout) keep their bound.
- ``b < v``: lower bounds drop by ``repeats * (v - b)`` (never below 0); nothing is tightened.
- ``absent``: the value is dropped, windows stay as written (the bridge has no such wait; if it
  has one of its own, its profile must say ``fixed``).

``repeats`` is how many of the knob's waits one window may hold: the respawn backoff doubles per
attempt, so a budget of ``r`` respawns waits up to ``2**r - 1`` first delays; a poll or a ping
period may need two periods to be seen; every other knob one.

A count (a respawn or connect-retry budget) is pace where the scenario's point holds at any
budget (the host keeps working when the palace never comes up). Its bridge value is the fixed
count, or 0 when ``absent`` (no budget: no respawn). Every number the scenario lists for it in
``budget_counts`` (process starts, distinct pids, initializes of children that all die) moves by
``b - v``, and each attempt past the scenario's adds its backoff wait (the bridge's own backoff,
doubling) and a start of the child to every window at least the scenario's backoff long.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from palace_conformance.json_pointer import unescape
from palace_conformance.runner.profile import SAME_AS_FLOOR_MS, SEED_DEFAULT_MS, Profile
from palace_conformance.scenarios.model import Scenario

#: a derived window's slack: this share of the wait it adds, plus a fixed part
PACE_SLACK_FRACTION = 0.25
PACE_SLACK_MS = 1000
#: a settle without ``max_ms`` waits this long (the format's default)
SETTLE_MAX_DEFAULT_MS = 5000
BACKOFF = "MEMPALACE_MCP_RESPAWN_BACKOFF_MS"
MAX_RESPAWNS = "MEMPALACE_MCP_MAX_RESPAWNS"
CONNECT_BACKOFF = "MEMPALACE_REMOTE_CONNECT_BACKOFF_MS"
CONNECT_RETRIES = "MEMPALACE_REMOTE_CONNECT_RETRIES"
#: the seed's respawn and connect-retry budgets; a doubling wait is counted over at most this
#: many attempts
SEED_RETRIES = 3
#: knobs whose wait comes round periodically: two periods may pass before it is seen
PERIODIC = frozenset({"MEMPALACE_MCP_KEEPALIVE_MS", "MEMPALACE_MAILBOX_POLL_MS"})
#: budgets (counts of attempts) and the backoff each attempt waits, doubling
COUNTS = {MAX_RESPAWNS: BACKOFF, CONNECT_RETRIES: CONNECT_BACKOFF}
#: the seed's default first delay of a backoff, when neither the scenario nor the bridge says
SEED_BACKOFF_MS = 1000
#: what one more start of a child may take on a loaded machine (the fake's interpreter)
PACE_START_MS = 1000


@dataclass(frozen=True)
class PaceChange:
    """One pace value the bridge could not be given."""

    name: str
    value: str  # the scenario's
    bridge: int | None  # the bridge's fixed value in ms; None: absent (dropped)
    repeats: int = 1
    #: a count (``COUNTS``): the first delay of each attempt past the scenario's, and the
    #: scenario's own first delay (windows shorter than that are "at once" and keep their bound)
    attempt_backoff_ms: int | None = None
    threshold_backoff_ms: int = 0
    #: the value is given as ``bridge`` instead of dropped: a pace value too short for a start of
    #: the palace, raised for a bridge whose start-up follows it (``same_as``)
    raised: bool = False

    @property
    def is_count(self) -> bool:
        return self.attempt_backoff_ms is not None

    @property
    def threshold_ms(self) -> int:
        """Windows at least this long may hold the wait the change adds."""
        if self.is_count:
            return self.threshold_backoff_ms
        return int(self.value) if self.value.isdigit() else 0

    @property
    def widen_ms(self) -> int:
        """What every window at least ``threshold_ms`` long grows by."""
        if self.bridge is None or not self.value.isdigit() or self.bridge <= int(self.value):
            return 0
        if self.attempt_backoff_ms is not None:  # attempts v+1..b, each waiting 2**(k-1) delays
            extra = range(int(self.value) + 1, self.bridge + 1)
            added = sum(self.attempt_backoff_ms * (1 << (k - 1)) + PACE_START_MS for k in extra)
        else:
            added = self.repeats * (self.bridge - int(self.value))
        return math.ceil(added * (1 + PACE_SLACK_FRACTION)) + PACE_SLACK_MS

    @property
    def lower_ms(self) -> int:
        """What lower bounds drop by (a bridge quicker than the scenario's value)."""
        if (self.bridge is None or self.is_count or not self.value.isdigit()
                or self.bridge >= int(self.value)):
            return 0
        return self.repeats * (int(self.value) - self.bridge)

    @property
    def count_delta(self) -> int:
        """What each of the scenario's ``budget_counts`` moves by (a count only)."""
        if not self.is_count or self.bridge is None or not self.value.isdigit():
            return 0
        return self.bridge - int(self.value)

    def describe(self) -> str:
        if self.is_count:
            counts = f", its counts {self.count_delta:+d}" if self.count_delta else ""
            widen = f", windows +{self.widen_ms} ms" if self.widen_ms else ""
            return (f"{self.name}={self.value} -> the bridge's budget of {self.bridge}"
                    f"{counts}{widen}")
        if self.bridge is None:
            return f"{self.name}={self.value} dropped (the bridge has none)"
        widen = f", windows +{self.widen_ms} ms" if self.widen_ms else ""
        if self.raised:
            return (f"{self.name}={self.value} raised to {self.bridge} (its start-up follows it, "
                    f"same_as){widen}")
        return f"{self.name}={self.value} -> the bridge's fixed {self.bridge}{widen}"


@dataclass(frozen=True)
class Paced:
    """A scenario as it runs on one bridge: pace values it lacks dropped, windows derived."""

    scenario: Scenario
    changes: tuple[PaceChange, ...] = ()
    #: added to every op deadline the runner sets itself (a step without ``timeout_ms``)
    deadline_extra_ms: int = 0
    #: what the derived windows add to the scenario's own waits (``sleep`` steps), in ms
    sleep_extra_ms: int = 0

    @property
    def note(self) -> str:
        """One line for the result: what was changed and why."""
        return ("pace values this bridge has no knob for: "
                + "; ".join(c.describe() for c in self.changes))


def pace(profile: Profile, scenario: Scenario, edited: dict[str, Any] | None = None) -> Paced:
    """``scenario`` for a bridge with ``profile``: unchanged unless one of its pace values names
    a knob the profile says is ``fixed``, ``absent`` or ``same_as`` another, or one that such a
    ``same_as`` knob follows. ``edited``: the scenario's data as profile_edges.py already changed
    it (its env untouched), paced in place and built with the pace edits: one build a run."""
    changes = tuple(_changes(profile, scenario))
    if not changes:
        return Paced(scenario if edited is None else Scenario.from_json(edited, scenario.path))
    raw: dict[str, Any] = copy.deepcopy(dict(scenario.raw)) if edited is None else edited
    dropped = {c.name for c in changes}
    raw["env"] = {k: v for k, v in raw.get("env", {}).items() if k not in dropped}
    for change in changes:
        if change.raised:
            raw["env"][change.name] = str(change.bridge)
    kept = [n for n in raw.get("env_pace", []) if n not in dropped]
    if kept:
        raw["env_pace"] = kept
    else:
        raw.pop("env_pace", None)
    counts = raw.pop("budget_counts", None) or {}
    for change in changes:
        for pointer in counts.get(change.name, ()) if change.is_count else ():
            _move_count(raw, pointer, change.count_delta)
    left = {name: pointers for name, pointers in counts.items() if name not in dropped}
    if left:  # a budget the bridge was given: its counts stand as written
        raw["budget_counts"] = left
    sleep_before = _sleep_total(raw)
    _derive_windows(raw, changes)
    derived = Scenario.from_json(raw, scenario.path)
    return Paced(derived, changes,
                 deadline_extra_ms=sum(c.widen_ms for c in changes),
                 sleep_extra_ms=_sleep_total(raw) - sleep_before)


def _changes(profile: Profile, scenario: Scenario) -> list[PaceChange]:
    out = []
    env = scenario.env
    for name in sorted(scenario.env_pace):
        knob = profile.knobs.get(name)
        value = env.get(name)
        if value is not None and knob is not None and knob.same_as is not None:
            followed = env.get(knob.same_as) or str(SEED_DEFAULT_MS.get(knob.same_as, ""))
            if followed.isdigit():  # the bridge's value is the other knob's
                out.append(PaceChange(name, value, int(followed)))
            continue
        raised = _raised(name, value, profile, scenario)
        if raised is not None:
            out.append(raised)
            continue
        if knob is None or value is None or not (knob.absent or knob.fixed is not None):
            continue
        if name in COUNTS:
            out.append(_count_change(name, value, profile, env))
            continue
        bridge = None if knob.absent else _ms(knob.fixed)
        out.append(PaceChange(name, value, bridge, _repeats(name, profile, env)))
    return out


def _raised(name: str, value: str | None, profile: Profile,
            scenario: Scenario) -> PaceChange | None:
    """A pace value that a knob of the bridge follows (``same_as``) where the seed would have
    kept that knob longer: the bridge would bound its start-up by the short value, so it is
    given at least ``SAME_AS_FLOOR_MS`` instead (a pace value: the scenario is not about it)."""
    if value is None or not value.isdigit() or not 0 < int(value) < SAME_AS_FLOOR_MS:
        return None
    for follower, knob in profile.knobs.items():
        if knob.same_as != name:
            continue
        own = scenario.env.get(follower)
        seed = own if own is not None and follower not in scenario.env_pace else \
            str(SEED_DEFAULT_MS.get(follower, ""))
        if not seed.isdigit() or int(seed) == 0 or int(seed) > int(value):
            return PaceChange(name, value, SAME_AS_FLOOR_MS, raised=True)
    return None


def _count_change(name: str, value: str, profile: Profile,
                  env: Mapping[str, str | None]) -> PaceChange:
    """A budget the bridge has fixed (or none of: 0 attempts), with the backoff its extra
    attempts wait: the bridge's own fixed one, else the scenario's, else the seed's default."""
    knob = profile.knobs[name]
    bridge = 0 if knob.absent else _ms(knob.fixed)
    backoff_name = COUNTS[name]
    given = env.get(backoff_name)
    scenario_backoff = int(given) if given is not None and given.isdigit() else SEED_BACKOFF_MS
    backoff_knob = profile.knobs.get(backoff_name)
    own = _ms(backoff_knob.fixed) if backoff_knob is not None else None
    if backoff_knob is not None and backoff_knob.absent:
        own = 0
    return PaceChange(name, value, bridge, attempt_backoff_ms=scenario_backoff if own is None
                      else own, threshold_backoff_ms=scenario_backoff)


def _move_count(raw: dict[str, Any], pointer: str, delta: int) -> None:
    """The integer at ``pointer`` (a count's ``equals``/``at_least``/``at_most``, a
    ``processes.spawned``) moved by ``delta``, never below 0; a count made a floor moves its
    ``at_least``."""
    *parents, last = [unescape(t) for t in pointer.split("/")[1:]]
    node: Any = raw
    for token in parents:
        node = node[int(token)] if isinstance(node, list) else node[token]
    key: Any = int(last) if isinstance(node, list) else last
    if isinstance(node, dict) and last == "equals" and key not in node:
        key = "at_least"  # made a floor already (a per-call budget, profile_edges)
    value = node[key] if isinstance(node, list) or key in node else None
    if isinstance(value, dict) and isinstance(value.get("at_least"), int):
        node, key, value = value, "at_least", value["at_least"]
    if isinstance(value, int):
        node[key] = max(0, value + delta)


def _ms(fixed: int | str | None) -> int | None:
    if isinstance(fixed, int):
        return fixed
    if isinstance(fixed, str) and fixed.isdigit():
        return int(fixed)
    return None  # not a duration (a fixed flag or name): dropped, no window follows it


def _repeats(name: str, profile: Profile, env: Mapping[str, str | None]) -> int:
    if name in PERIODIC:
        return 2
    budget = {BACKOFF: MAX_RESPAWNS, CONNECT_BACKOFF: CONNECT_RETRIES}.get(name)
    if budget is None:
        return 1
    attempts = SEED_RETRIES
    knob = profile.knobs.get(budget)
    given = env.get(budget)
    if knob is not None and isinstance(knob.fixed, int):
        attempts = knob.fixed
    elif given is not None and given.isdigit():
        attempts = int(given)
    attempts = max(1, min(attempts, SEED_RETRIES))
    return int(2 ** attempts) - 1


def _widen(bound: int, changes: tuple[PaceChange, ...]) -> int:
    """How much a window with upper bound ``bound`` grows: each paced wait it could hold."""
    return sum(c.widen_ms for c in changes if c.value.isdigit() and bound >= c.threshold_ms)


def _derive_windows(raw: dict[str, Any], changes: tuple[PaceChange, ...]) -> None:
    lower = sum(c.lower_ms for c in changes)
    for step in raw.get("steps", []):
        if not isinstance(step, dict):
            continue
        if isinstance(step.get("timeout_ms"), int):
            step["timeout_ms"] += _widen(step["timeout_ms"], changes)
        if step.get("op") == "settle":
            max_ms = step.get("max_ms", SETTLE_MAX_DEFAULT_MS)
            step["max_ms"] = max_ms + _widen(max_ms, changes)
        if step.get("op") == "sleep" and isinstance(step.get("ms"), int):
            step["ms"] += _widen(step["ms"], changes)
    _timings(raw.get("steps"), changes, lower)
    _timings(raw.get("expect"), changes, lower)


def _timings(value: Any, changes: tuple[PaceChange, ...], lower: int) -> None:
    """Every duration (``{"at_least", "slack_ms"}``: a step's ``elapsed_ms``, a gap's ``ms``)."""
    if isinstance(value, list):
        for item in value:
            _timings(item, changes, lower)
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        if key in ("elapsed_ms", "ms") and isinstance(item, dict) and "at_least" in item:
            at_least = int(item["at_least"])
            if "slack_ms" in item:
                item["slack_ms"] = int(item["slack_ms"]) + _widen(
                    at_least + int(item["slack_ms"]), changes)
            if lower:
                dropped = min(at_least, lower)
                item["at_least"] = at_least - dropped
                if "slack_ms" in item:
                    item["slack_ms"] = int(item["slack_ms"]) + dropped  # same upper bound
        else:
            _timings(item, changes, lower)


def _sleep_total(raw: Mapping[str, Any]) -> int:
    return sum(int(s.get("ms", 0)) for s in raw.get("steps", [])
               if isinstance(s, dict) and s.get("op") == "sleep")
