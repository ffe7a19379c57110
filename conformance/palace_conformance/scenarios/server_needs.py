"""What a scenario needs of the palace server behind the bridge, derived from the scenario itself.

Bridges declare capabilities in ``hello``; servers declare theirs here. The fake can do anything a
scenario asks (it was built for the catalogue); the real ``mempalace`` cannot inject faults, has
no control API and no stateful sessions, and journals only what a relay or proxy can see. Each
need is read off the scenario in one place (:func:`needs`), so a new scenario is classified
without any hand list, and the reason a run is *not applicable* names exactly what is missing:
``needs fault injection (crash, stall)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from palace_conformance.scenarios.model import Check, Scenario

#: the capabilities a server may declare, and how a missing one reads in a reason
SERVER_CAPABILITIES = {
    "fault_injection": "needs fault injection",
    "control_api": "needs the fake's control API",
    "stateful_sessions": "needs stateful HTTP sessions",
    "fake_journal": "checks journal records only the fake writes",
    "fake_self_test": "a self-test of the fake",
    "lock_holder": "needs a palace lock holder",
    "palace_seed": "needs a seeded palace",
    "server_kill": "needs the server killed mid-run",
    "prompt_eof_exit": "needs the server to exit on stdin EOF inside the bridge's stop grace",
}
#: server actions that go through the fake's control API
CONTROL_ACTIONS = frozenset({"arm", "clear_faults", "forget_sessions", "rotate_token"})


@dataclass(frozen=True)
class Need:
    """One thing a run asks of the server: a capability and what exactly (``crash, stall``)."""

    capability: str
    detail: str = ""

    def reason(self) -> str:
        label = SERVER_CAPABILITIES[self.capability]
        return f"{label} ({self.detail})" if self.detail else label


@dataclass(frozen=True)
class ServerTraits:
    """What a server can do: its name, capabilities and the journal kinds it writes
    (``None``: every kind a scenario may check)."""

    name: str
    capabilities: frozenset[str]
    journal_kinds: frozenset[str] | None = None


FAKE_SERVER = ServerTraits("fake", frozenset(SERVER_CAPABILITIES))


def _journal_checks(scenario: Scenario, transport: str) -> Iterator[Check]:
    yield from (c for c in scenario.expect.journal if c.applies_to(transport))
    for step in scenario.steps_for(transport):
        if step.expect is not None:
            yield from (c for c in step.expect.journal if c.applies_to(transport))


#: where a journal check holds its record patterns
PATTERN_KEYS = ("match", "items", "from", "to", "first", "then", "after")


def _pattern_kinds(pattern: Any) -> Iterator[str]:
    """The ``kind`` a record pattern names (a string, or the strings of an ``$in``); a
    ``kind`` nested deeper belongs to a message's content, not to the journal."""
    if not isinstance(pattern, dict):
        return
    kind = pattern.get("kind")
    if isinstance(kind, str):
        yield kind
    elif isinstance(kind, dict) and isinstance(kind.get("$in"), list):
        yield from (k for k in kind["$in"] if isinstance(k, str))


def _finds_nothing(check: Check) -> bool:
    """An ``absent`` check, or a ``count`` of exactly 0: it holds on any server that never
    writes the kind, which is what it says."""
    return check.kind == "absent" or (check.kind == "count" and check.raw.get("equals") == 0)


def checked_kinds(scenario: Scenario, transport: str) -> set[str]:
    """The journal kinds a run's checks must find records of."""
    found: set[str] = set()
    for check in _journal_checks(scenario, transport):
        if _finds_nothing(check):
            continue
        for key in PATTERN_KEYS:
            value = check.raw.get(key)
            for pattern in value if isinstance(value, list) else [value]:
                found.update(_pattern_kinds(pattern))
    return found


def _forbids_sigterm(scenario: Scenario) -> bool:
    """Whether the whole run, its stop included, must see no SIGTERM to the child: a
    scenario-level ``absent`` check of ``signal`` records, or ``processes.signals.SIGTERM: 0``."""
    processes = scenario.expect.processes
    sigterm = processes.signals.get("SIGTERM") if processes is not None else None
    if sigterm is not None and sigterm.equals == 0:
        return True
    return any(c.kind == "absent" and "signal" in set(_pattern_kinds(c.raw.get("match")))
               for c in scenario.expect.journal if c.applies_to("stdio"))


def needs(scenario: Scenario, transport: str, journal_kinds: Iterable[str] | None = None
          ) -> list[Need]:
    """Everything the run of ``scenario`` on ``transport`` asks of its server; with
    ``journal_kinds``, the checked kinds outside it are a ``fake_journal`` need."""
    found: list[Need] = []
    if scenario.subject == "fake":
        found.append(Need("fake_self_test"))
    faults = scenario.faults.for_transport(transport).faults
    if faults:
        found.append(Need("fault_injection", ", ".join(sorted({f.action for f in faults}))))
    actions = [str(s.params.get("action")) for s in scenario.steps_for(transport)
               if s.op == "server"]
    control = sorted({a for a in actions if a in CONTROL_ACTIONS})
    if control:
        found.append(Need("control_api", ", ".join(control)))
    if "kill" in actions:
        found.append(Need("server_kill"))
    if transport == "http" and scenario.http.sessions:
        found.append(Need("stateful_sessions"))
    if scenario.palace.lock_held:
        found.append(Need("lock_holder"))
    stops = any(s.op in ("shutdown", "reload") for s in scenario.steps_for(transport))
    if transport == "stdio" and stops and _forbids_sigterm(scenario):
        found.append(Need("prompt_eof_exit"))
    palace = scenario.palace
    seeded = [name for name, items in (("diary", palace.diary), ("drawers", palace.drawers),
                                       ("events", palace.events)) if items]
    if seeded:
        found.append(Need("palace_seed", ", ".join(seeded)))
    if journal_kinds is not None:
        outside = sorted(checked_kinds(scenario, transport) - set(journal_kinds))
        if outside:
            found.append(Need("fake_journal", ", ".join(outside)))
    return found


def unmet_reason(scenario: Scenario, transport: str, server: ServerTraits) -> str | None:
    """Why ``server`` cannot serve this run (every unmet need, in one line), or None."""
    unmet = [need.reason() for need in needs(scenario, transport, server.journal_kinds)
             if need.capability not in server.capabilities]
    if not unmet:
        return None
    return f"on the {server.name} server, " + "; ".join(unmet)


def reason_label(reason: str) -> str:
    """The first unmet need's label in a reason :func:`unmet_reason` wrote, details dropped:
    what a summary counts not-applicable results by."""
    head = reason.split("; ", 1)[0]
    head = head.split(" server, ", 1)[-1]
    return head.split(" (", 1)[0]
