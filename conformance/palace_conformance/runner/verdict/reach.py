"""A bridge that never reached the fake palace: one *not testable* line, not a pile of failures.

A real bridge may start its palace in a way the runner does not put in its reach (a launcher it
looks for elsewhere, a Python without the fake package, a remote URL it ignores). Its run then
judges a bridge talking to nothing, and every expectation fails for the same reason, which is
not the bridge's palace behaviour at all. So a run is classified *not testable* when:

* the scenario drives a bridge (``subject: bridge``) and expects palace contact: the palace is
  installed (``palace.installed`` is not false) and some step on this transport calls a tool
  (``call_tool``, or a call of ``call_tools``) without expecting ``no_such_tool`` (a scenario
  that expects no palace tools, such as a missing ``mempalace-mcp`` or an unreachable remote,
  expects no contact);
* every step ran to completion at the host (a host that hung or crashed is reported as such);
* no ``load`` step that expects ``ok: true`` was refused (a bridge whose load raised, say on a
  malformed knob, broke a rule the scenario states: that is its failure to judge, not a palace
  the runner failed to provide);
* and the journal shows no contact: no stdio fake started (``process_start`` on stdio), no HTTP
  request reached the HTTP fake, no helper or fake CLI ran (``helper_run``, ``cli_run``,
  ``feed_prepare``). The HTTP fake's own ``process_start`` is the runner's doing, not contact.

The line quotes the bridge's own start-up diagnostics: the last ``stderr`` and ``notify``
effects, else the tail of the host's stderr. fixtures/README.md states the rule.

The same holds for a whole transport (:func:`collapse_unreached`): a bridge that, in a whole
run, never spoke MCP to the fake on a transport (no ``recv`` on it in any journal: a CLI-only
bridge, one whose resolver gives up, one that ignores the remote URL) is one *not testable*
line for that transport, quoting its diagnostics, instead of a failure per scenario that all
say the same thing. Its ``mempalace`` CLI runs do not count here: they are no transport.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from palace_conformance.runner.results import (
    NOT_APPLICABLE,
    NOT_TESTABLE,
    ScenarioResult,
    StepRecord,
)
from palace_conformance.scenarios.model import Scenario

#: journal kinds that only a bridge's own doing writes (helpers, the fake CLI, HTTP requests)
CONTACT_KINDS = frozenset({"http_request", "helper_run", "cli_run", "feed_prepare"})
DIAGNOSTIC_LINES = 3  # how many of the last diagnostic lines are quoted
DIAGNOSTIC_CHARS = 300  # the quote's length limit
NOTHING_SAID = "the bridge printed nothing"


def expects_contact(scenario: Scenario, transport: str) -> bool:
    """Whether a run of ``scenario`` on ``transport`` must reach the palace to mean anything."""
    if scenario.subject != "bridge" or not scenario.palace.installed:
        return False
    for step in scenario.steps_for(transport):
        if step.op == "call_tool":
            expectations = [step.expect]
        elif step.op == "call_tools":
            calls = step.expect.calls if step.expect is not None else ()
            expectations = [calls[i] if i < len(calls) else None
                            for i in range(len(step.tool_names))]
        else:
            continue
        for expect in expectations:
            error = expect.error if expect is not None else None
            if error is None or error.kind != "no_such_tool":
                return True
    return False


def refused_expected_load(scenario: Scenario, transport: str,
                          steps: Sequence[StepRecord]) -> bool:
    """Whether a ``load`` step that expects ``ok: true`` completed with ``ok: false``."""
    expecting = {step.index for step in scenario.steps_for(transport)
                 if step.op == "load" and step.expect is not None and step.expect.ok is True}
    return any(record.index in expecting and record.ok is False for record in steps)


def contacted(journal: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the journal shows the bridge reaching the fake in any way."""
    for record in journal:
        kind = record.get("kind")
        if kind in CONTACT_KINDS:
            return True
        if kind == "process_start" and record.get("transport") == "stdio":
            return True
    return False


def diagnostics(steps: Sequence[StepRecord], host_stderr: str) -> str:
    """The bridge's last words on one line: its ``stderr``/``notify`` effects, else the tail of
    the host's stderr; truncated."""
    lines = []
    for step in steps:
        for effect in step.effects:
            if effect.get("kind") == "stderr" and effect.get("via") != "notify":
                lines.append(str(effect.get("line", "")))  # (a profile's copy of a notify: once)
            elif effect.get("kind") == "notify":
                lines.append(f"notify {effect.get('level', 'info')}: {effect.get('message', '')}")
    lines = [line.strip() for line in lines if line.strip()]
    if not lines:
        lines = [line.strip() for line in host_stderr.splitlines() if line.strip()]
    if not lines:
        return NOTHING_SAID
    text = " | ".join(lines[-DIAGNOSTIC_LINES:])
    return text if len(text) <= DIAGNOSTIC_CHARS else text[: DIAGNOSTIC_CHARS - 3] + "..."


#: how the not-testable reason of a bridge that never reached the fake begins
UNREACHED = "the bridge never reached the fake palace"


def unreached_reason(scenario: Scenario, transport: str, steps: Sequence[StepRecord],
                     journal: Sequence[Mapping[str, Any]],
                     host_stderr: Callable[[], str]) -> str | None:
    """Why the run is not testable because the bridge never reached the fake, or None.
    ``host_stderr`` is asked for only then (the caller may have to wait for all of it)."""
    if not expects_contact(scenario, transport):
        return None
    if any(not step.ran or step.failure is not None for step in steps):
        return None
    if refused_expected_load(scenario, transport, steps):
        return None
    if contacted(journal):
        return None
    return (f"{UNREACHED} (no stdio child, HTTP request or helper run in the journal), so "
            "nothing could be judged; does it start the palace in a way the runner does not "
            "provide? Its diagnostics: " + diagnostics(steps, host_stderr()))


#: the scenario id of the one line that stands for a transport the bridge never reached
UNREACHED_ID = "bridge.reach"


def spoke_mcp(result: ScenarioResult) -> bool:
    """Whether the fake received an MCP message on the result's own transport."""
    return any(record.get("kind") == "recv" and record.get("transport") == result.transport
               for record in result.journal)


def _loaded(result: ScenarioResult) -> bool:
    """The bridge loaded and every step ran to completion at the host."""
    return (any(step.op == "load" and step.ok for step in result.steps)
            and all(step.ran and step.failure is None for step in result.steps))


def collapse_unreached(results: Sequence[ScenarioResult], scenarios: Mapping[str, Scenario],
                       transports: Iterable[str]) -> list[ScenarioResult]:
    """``results`` with each transport the bridge never reached replaced by one *not
    testable* line (see the module docstring). A transport is unreached when some run on it
    needed the palace, loaded the bridge and ran to completion at the host, and no run on it
    reached the fake over MCP; a bridge that never loaded, or a host that crashed or hung
    everywhere, keeps its results."""
    out = list(results)
    for transport in transports:
        mine = [r for r in out if r.transport == transport and r.subject == "bridge"
                and r.status != NOT_APPLICABLE]
        needing = [r for r in mine if r.scenario in scenarios
                   and expects_contact(scenarios[r.scenario], transport) and _loaded(r)]
        if not needing or any(spoke_mcp(r) for r in mine):
            continue
        quote = diagnostics(needing[0].steps, needing[0].host_stderr)
        line = ScenarioResult(
            scenario=UNREACHED_ID, transport=transport, status=NOT_TESTABLE,
            title=f"the bridge never reached the fake palace over {transport}",
            reason=(f"{UNREACHED} over {transport}; its diagnostics: {quote}. None of the "
                    f"{len(mine)} scenario(s) run on it could be judged (no MCP request in any "
                    f"journal), so none is reported: does it start the palace in a way the "
                    f"runner does not provide (a CLI only, a launcher elsewhere, a settings "
                    f"file a profile should write)?"),
            duration_ms=sum(r.duration_ms for r in mine), host_stderr=needing[0].host_stderr,
            level=needing[0].level)
        out = [r for r in out if r not in mine] + [line]
    return out
