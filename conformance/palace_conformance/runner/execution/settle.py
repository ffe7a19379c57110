"""A ``settle`` step: the host's settle, ended on the event its step waits for.

A step whose expectations must be shown over the whole window (an absence, an exact count, no
expectation at all: :mod:`..verdict.early_end`) sends one ``settle`` request, as it always did. A
step whose expectations are all positive and monotone is run as:

1. ``settle`` with ``quiet_ms: 0`` and the step's ``max_ms``: the host waits for the bridge's
   background work (the reference host's ``Bridge.drain()``), as every settle does first, and no
   quiet period;
2. then, every ``POLL_MS``, a look at what the step has seen (effects, the journal since the step
   began, the registered tools): once every expectation holds, the settle ends;
3. until then, short ``settle`` requests with the step's own ``quiet_ms`` keep the old end: a
   host that answers before such a request's ``max_ms`` has seen ``quiet_ms`` without an effect,
   and the runner also ends once no reply brought an effect for ``quiet_ms``; ``max_ms`` bounds
   it all.

So a settle never ends before its old quiet window unless its expectations already hold, and the
window it keeps is measured by events (effects, replies), not by a fixed sleep. A settle that waits
for tools (``SettleCondition.until_tools``) lists them at every look and does not end on quiet
before one is registered; ``max_ms`` bounds that wait too.

Effects and tools are read through the bridge profile (``Views``), so a settle judges what the
scenarios name: catalogue tool names, a notify diagnostic as a stderr line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from palace_conformance.runner.execution.driver import DriverClient, Reply
from palace_conformance.runner.results import StepRecord
from palace_conformance.runner.verdict.early_end import SettleCondition

POLL_MS = 25.0  # how often an event-driven settle looks again
LIST_TOOLS_TIMEOUT_MS = 5000

#: what ended a settle (``StepRecord.ended_by``)
ENDED_BY_EXPECTATIONS = "expectations"  # every expectation of the step held
ENDED_BY_QUIET = "quiet"  # no effect for quiet_ms (the old end)
ENDED_BY_MAX = "max_ms"  # the upper bound
ENDED_BY_ERROR = "error"  # the host answered ok: false

Records = Sequence[Mapping[str, Any]]
EffectsView = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
ToolsView = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def _as_is(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return items


def window_end(reply: Reply, max_ms: float) -> str:
    """What ended one host ``settle`` request: quiet if it answered before ``max_ms``."""
    if not reply.ok:
        return ENDED_BY_ERROR
    took = reply.host_ms if reply.host_ms is not None else reply.elapsed_ms
    return ENDED_BY_QUIET if took < max_ms else ENDED_BY_MAX


class EventSettle:
    """One event-driven settle (steps 1-3 above) for one step record."""

    def __init__(self, driver: DriverClient, request: Mapping[str, Any],
                 condition: SettleCondition, journal: Callable[[], Records], *,
                 poll_ms: float = POLL_MS, effects_view: EffectsView = _as_is,
                 tools_view: ToolsView = _as_is) -> None:
        self.driver = driver
        self.effects_view = effects_view  # a reply's effects as the scenarios name them
        self.tools_view = tools_view  # the registered tools as the scenarios name them
        self.request = dict(request)
        self.condition = condition
        self.journal = journal  # the journal records written since the step began
        self.poll_ms = poll_ms
        self.quiet_ms = float(self.request.get("quiet_ms", 200))
        self.max_ms = float(self.request.get("max_ms", 5000))
        self.budget_ms = float(self.request.get("timeout_ms", self.max_ms))
        self.started = 0.0
        self.last_effect = 0.0  # when a reply last brought an effect (or the start)
        self.host_ms: float | None = None

    def run(self, record: StepRecord) -> None:
        """Fill ``record`` (reply, effects, durations, ``ended_by``); raises DriverFailure."""
        self.started = self.last_effect = time.monotonic()
        window_end_at = self.started + self.max_ms / 1000.0
        reply = self._settle(record, 0.0, self.max_ms)  # background work, no quiet period
        condition = self.condition
        tools: list[dict[str, Any]] | None = None
        while True:
            if not reply.ok:
                ended = ENDED_BY_ERROR
                break
            if condition.tools is not None or (condition.needs_tools and not tools):
                tools = self._tools(record)
            journal = self.journal() if condition.needs_journal else ()
            if condition.met(record.effects, journal, tools):
                ended = ENDED_BY_EXPECTATIONS
                break
            now = time.monotonic()
            if now >= window_end_at:
                ended = ENDED_BY_MAX
                break
            quiet_allowed = condition.may_end_quiet(tools)
            if quiet_allowed and (now - self.last_effect) * 1000.0 >= self.quiet_ms:
                ended = ENDED_BY_QUIET
                break
            slice_ms = min(self.poll_ms, (window_end_at - now) * 1000.0)
            reply = self._settle(record, self.quiet_ms, slice_ms)
            if quiet_allowed and reply.ok and window_end(reply, slice_ms) == ENDED_BY_QUIET:
                ended = ENDED_BY_QUIET  # the host's own quiet period is over
                break
        record.ended_by = ended
        record.host_ms = self.host_ms
        record.elapsed_ms = (time.monotonic() - self.started) * 1000.0

    # -- requests -------------------------------------------------------------------------------

    def _budget_ms(self, cap: float | None = None) -> int:
        """What is left of the step's own deadline (``timeout_ms``), for the next request."""
        left = self.budget_ms - (time.monotonic() - self.started) * 1000.0
        return max(int(min(left, cap) if cap is not None else left), 1)

    def _note(self, record: StepRecord, reply: Reply) -> None:
        if reply.effects:
            record.effects.extend(self.effects_view(list(reply.effects)))
            self.last_effect = time.monotonic()

    def _settle(self, record: StepRecord, quiet_ms: float, max_ms: float) -> Reply:
        budget = self._budget_ms()
        fields = {**self.request, "quiet_ms": quiet_ms, "max_ms": max_ms, "timeout_ms": budget}
        reply = self.driver.request("settle", fields, deadline_ms=budget)
        record.ok, record.result, record.error = reply.ok, reply.result, reply.error
        self._note(record, reply)
        if reply.host_ms is not None:
            self.host_ms = (self.host_ms or 0.0) + reply.host_ms
        return reply

    def _tools(self, record: StepRecord) -> list[dict[str, Any]] | None:
        """The registered tools now (``list_tools``); its reply's effects belong to the step."""
        budget = self._budget_ms(LIST_TOOLS_TIMEOUT_MS)
        reply = self.driver.request("list_tools", {"timeout_ms": budget}, deadline_ms=budget)
        self._note(record, reply)
        if not reply.ok or not isinstance(reply.result, list):
            return None
        return self.tools_view([t for t in reply.result if isinstance(t, dict)])
