"""When a ``settle`` step may end before its quiet window: the rule, as code.

A settle waits until no effect arrived for ``quiet_ms`` (at most ``max_ms``). That window is the
only way to show that something does *not* happen, so a settle keeps it whenever its step expects
an absence, an exact or capped count, a duration, or nothing at all. It may end sooner only when
every expectation on the step is *positive and monotone*: once it holds, a longer window (more
journal records, more effects, more registered tools) cannot make it fail. Then the settle waits
for what it is there for and no longer. docs/runner.md ("Event-driven settles") has the rule in
prose; :mod:`..execution.settle` runs it.

Monotone, per expectation:

- ``sequence``: an ordered subsequence, once found, stays found.
- ``count`` / ``distinct`` with no ``equals`` and no ``at_most``: only a lower bound.
- tools ``includes``: a host's registry only grows (pi has no unregister).
- tools ``registered`` (a name list or ``"catalogue"``), with ``schemas`` / ``order`` on that set:
  the event the settle waits for is "the expected set is registered"; once it is, only a name
  outside the set registered later could break it, which is a different fault than the one the
  step waits for (the scenario's own ``expect.tools`` judges the registry at the end).

Never monotone: ``absent``, ``order``, ``gap``, upper-bounded counts, tools ``excludes`` or
``registered: "none"``, ``elapsed_ms``.

Waiting for tools: a bridge may register its tools from background work after ``session_start``
has returned (a connect the host does not track), with no effect in between. A settle that waits
for tools (one whose positive ``tools`` expectation names tools, or one marked
``"until": "tools"``) therefore does not end on its quiet window while no tool is registered;
``max_ms`` still bounds it. Once a tool is there the usual ends apply, so a bridge that registers
the wrong set still ends on the quiet window, not on ``max_ms``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from palace_conformance.resources import tool_catalogue
from palace_conformance.runner.results import StepRecord
from palace_conformance.scenarios.checks import evaluate, evaluate_tools
from palace_conformance.scenarios.model import Check, Step, ToolsExpect

_BOUNDED_KINDS = ("count", "distinct")
#: a settle step's ``until`` value: do not end on quiet before a tool is registered
UNTIL_TOOLS = "tools"


def monotone(check: Check) -> bool:
    """Whether ``check``, once it passes, passes on every longer stream of records."""
    if check.kind == "sequence":
        return True
    if check.kind in _BOUNDED_KINDS:
        bounds = check.bounds
        return bounds.equals is None and bounds.at_most is None
    return False


def monotone_tools(tools: ToolsExpect) -> bool:
    """Whether a ``tools`` expectation is the positive event "these tools are registered"."""
    if tools.excludes or tools.registered == "none":
        return False
    if tools.registered is None and (tools.schemas is not None or tools.order is not None):
        return False  # schemas or order of whatever happens to be registered: no set to wait for
    return tools.registered is not None or bool(tools.includes)


@dataclass(frozen=True)
class SettleCondition:
    """The positive expectations a settle may end on, and whether they hold yet."""

    effects: tuple[Check, ...]
    journal: tuple[Check, ...]
    tools: ToolsExpect | None
    until_tools: bool = False  # quiet does not end it while no tool is registered
    catalogue: tuple[Mapping[str, Any], ...] | None = None  # the tools "catalogue" stands for

    @classmethod
    def for_step(cls, step: Step, transport: str,
                 catalogue: Sequence[Mapping[str, Any]] | None = None) -> SettleCondition | None:
        """The condition to end ``step`` on, or None when it must run its whole window (one
        host request). ``catalogue``: what ``"catalogue"`` means for this bridge (default: the
        whole catalogue)."""
        if step.op != "settle":
            return None
        shown = tuple(catalogue) if catalogue is not None else None
        waiting = cls((), (), None, True, shown) if step.params.get("until") == UNTIL_TOOLS \
            else None  # waits for a tool, then for the quiet window; never ends on checks
        expect = step.expect
        if expect is None or expect.elapsed_ms is not None:
            return waiting
        effects = tuple(c for c in expect.effects if c.applies_to(transport))
        journal = tuple(c for c in expect.journal if c.applies_to(transport))
        if not all(monotone(c) for c in (*effects, *journal)):
            return waiting
        if expect.tools is not None and not monotone_tools(expect.tools):
            return waiting
        if not effects and not journal and expect.tools is None:
            return waiting  # ok / result only: nothing the window waits for
        return cls(effects, journal, expect.tools,
                   waiting is not None or expect.tools is not None, shown)

    @property
    def has_checks(self) -> bool:
        """Whether the step has expectations the settle may end on (else it waits only)."""
        return bool(self.effects or self.journal or self.tools is not None)

    @property
    def needs_tools(self) -> bool:
        return self.tools is not None or self.until_tools

    @property
    def needs_journal(self) -> bool:
        return bool(self.journal)

    @cached_property
    def _catalogue(self) -> list[Mapping[str, Any]]:
        if self.catalogue is not None:
            return list(self.catalogue)
        return list(tool_catalogue()["tools"])

    def met(self, effects: Sequence[Mapping[str, Any]], journal: Sequence[Mapping[str, Any]],
            tools: Sequence[Mapping[str, Any]] | None) -> bool:
        """Whether every expectation holds on what the step has seen so far (``tools`` None:
        the registry could not be listed, so a tools expectation does not hold). A settle
        without expectations never ends on them."""
        if not self.has_checks:
            return False
        if not all(evaluate(c, effects).passed for c in self.effects):
            return False
        if not all(evaluate(c, journal).passed for c in self.journal):
            return False
        if self.tools is None:
            return True
        if tools is None:
            return False
        return all(v.passed for v in evaluate_tools(self.tools, tools, self._catalogue))

    def may_end_quiet(self, tools: Sequence[Mapping[str, Any]] | None) -> bool:
        """Whether the quiet window may end the settle: not while it waits for tools and none
        is registered yet (``tools`` None: the host cannot list them, so there is nothing to
        wait for)."""
        return not self.until_tools or tools is None or bool(tools)


def settled_step(step: Step, records: Sequence[StepRecord]) -> StepRecord | None:
    """For a ``settle``, the record of the step it settles (the one just before it, unless that
    is a settle or sleep too). Background work that step started (a feed after
    ``agent_settled``) may land in its window or the settle's, whichever the machine's load
    decides, so a settle's window, for the judge and for an early end alike, covers both."""
    if step.op != "settle" or step.index == 0:
        return None
    before = next((r for r in records if r.index == step.index - 1), None)
    if before is None or not before.ran or before.op in ("settle", "sleep"):
        return None
    return before
