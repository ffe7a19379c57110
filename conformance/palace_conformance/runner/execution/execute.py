"""Run one scenario on one transport: set up its world, drive every step, judge, clean up.

The outcome is a :class:`~.results.ScenarioResult`: ``passed`` or ``failed`` with check records;
``not_testable`` when a prerequisite could not be set up (the fake did not start, the host did not
load the bridge, the bridge never reached the fake: ``verdict.reach``) — a failure class, never a
skip; ``not_applicable`` when the scenario needs a capability or transport the host does not
declare — reported apart, not a failure.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palace_conformance import processes as procs
from palace_conformance.contract import (
    DEFAULT_OP_TIMEOUT_MS,
    HARNESS_CAPABILITIES,
    HOST_DEADLINE,
    HOST_EXITED,
)
from palace_conformance.redaction import Redactor, environment_secrets, scenario_secrets
from palace_conformance.runner.execution import pace
from palace_conformance.runner.execution.driver import DriverClient, DriverFailure, Reply
from palace_conformance.runner.execution.fake_client import FakeClient, Outcome
from palace_conformance.runner.execution.lateness import TimerProbe
from palace_conformance.runner.execution.settle import EventSettle, window_end
from palace_conformance.runner.execution.translation import TranslatedDriver, translation_for
from palace_conformance.runner.execution.world import (
    FAKE_PALACE,
    SIGNALS,
    PalaceServer,
    SetupError,
    World,
)
from palace_conformance.runner.profile import Profile
from palace_conformance.runner.results import (
    CORE,
    FAIL,
    NOT_APPLICABLE,
    NOT_TESTABLE,
    PASS,
    SEED,
    CheckRecord,
    ScenarioResult,
    StepRecord,
    redact_env,
    scenario_status,
)
from palace_conformance.runner.verdict import normalise
from palace_conformance.runner.verdict.early_end import SettleCondition, settled_step
from palace_conformance.runner.verdict.judge import Observation, judge, wire_texts
from palace_conformance.runner.verdict.levels import scenario_level
from palace_conformance.runner.verdict.reach import unreached_reason
from palace_conformance.scenarios import paths
from palace_conformance.scenarios.checks import live_descendants, process_facts
from palace_conformance.scenarios.model import Scenario, Step
from palace_conformance.scenarios.server_needs import unmet_reason

HELLO_TIMEOUT_MS = 10000
EXIT_TIMEOUT_MS = 3000
LIST_TOOLS_TIMEOUT_MS = 5000
CLOSE_STDIN_WAIT_MS = 5000  # how long a close_stdin step waits for the fake to exit
TEARDOWN_KEY = "(teardown)"
#: at the core level, how much longer children alive after the last step may take to go
CORE_PROCESS_GRACE_MS = 3000
#: a SIGKILLed grandchild ends a moment after the signal; so does a child its host SIGKILLed
#: as it exited (an ``exit`` step)
DESCENDANT_GRACE_MS = 1000
PROCESS_POLL_MS = 50


@dataclass(frozen=True)
class RunOptions:
    """How to run: the host command and the runner's own budgets."""

    host_argv: tuple[str, ...]
    op_timeout_ms: int = DEFAULT_OP_TIMEOUT_MS  # an op's deadline when the step sets none
    grace_ms: int = 3000  # runner-side slack past a host deadline before the host is killed
    hello_timeout_ms: int = HELLO_TIMEOUT_MS  # a host has this long to start and say hello
    work_root: Path | None = None  # where run directories are made (default: the system tmp)
    artifacts: Path | None = None  # keep each run's files under <artifacts>/<id>/<transport>
    warm_start: bool = True  # fork the reference host and the HTTP fake warm (warm_client)
    level: str = SEED  # judge at core (what any bridge must do) or seed (the seed's conventions)
    profile: Profile | None = None  # how this bridge differs from the seed (runner/profile.py)
    #: what watching the bridge showed it can do, judged in place of a host's placeholder list
    #: (hello ``capabilities_source: "default"``, no profile claims); runner/profiling/detect.py
    detected_capabilities: tuple[str, ...] | None = None
    #: ``run --slack-factor``: multiplies every declared slack (``slack_ms``) when judging
    slack_factor: float = 1.0
    #: the palace behind the bridge: the fake (a fresh one in every world) unless the run is
    #: handed another (``run --server real``: palace_conformance.real.world.RealServerSetup)
    server: PalaceServer = FAKE_PALACE
    #: the run's timer probe (execution/lateness.py): what the machine's wake-ups lost during a
    #: journal gap is added to its upper bound; None (a lone run, a test): nothing is added
    lateness: TimerProbe | None = None


def not_applicable_reason(scenario: Scenario, transport: str, capabilities: Iterable[str],
                          detected: bool = False) -> str | None:
    """Why the host cannot be asked to run this (missing capability or transport), or None;
    ``detected``: the capabilities were found by observation, not declared."""
    if scenario.subject == "fake":
        return None
    caps = set(capabilities)
    missing = [c for c in scenario.requires if c not in caps]
    if transport not in caps:
        missing.insert(0, transport)
    if not missing:
        return None
    harness = [c for c in missing if c in HARNESS_CAPABILITIES]
    if harness:  # the harness's, never observed: the host's word
        return (f"the host does not declare {', '.join(harness)} (its harness cannot give the "
                f"agent a tool result's content parts apart)")
    if detected:
        return (f"{', '.join(missing)} not detected by observation, and no profile claims "
                f"{'it' if len(missing) == 1 else 'them'}")
    return f"the host does not declare {', '.join(missing)}"


def host_deadline(step: Step, default_ms: int) -> int:
    """The op's deadline: the step's ``timeout_ms``, else what the op itself may take."""
    if step.timeout_ms is not None:
        return step.timeout_ms
    if step.op == "settle":
        return int(step.params.get("max_ms", 5000)) + default_ms
    if step.op == "shutdown":
        return int(step.params.get("grace_ms", 5000)) + default_ms
    if step.op == "reload":  # a shutdown and a load in one op
        return 2 * default_ms
    return default_ms


def op_deadline(step: Step, options: RunOptions) -> int:
    """:func:`host_deadline`, plus the real server's start allowance for a ``load``, ``reload``
    or ``cli`` that sets no ``timeout_ms`` (the runner's own budget; a scenario's is kept)."""
    deadline = host_deadline(step, options.op_timeout_ms)
    if step.op in ("load", "reload", "cli") and step.timeout_ms is None:
        deadline += options.server.start_allowance_ms
    return deadline


#: the driver op of an ``exit`` step with ``abrupt``: the host's process ends with no
#: ``session_shutdown``, no stop of its bridge and no last resort of its own
ABANDON = "abandon"


def _refused_op(step: Step, record: StepRecord) -> bool:
    """A ``reload``, ``call_tools`` or ``cli`` the host refused as a request it does not serve
    (DRIVER.md: a host that cannot reload its bridge, make concurrent calls or run its bridge's
    command-line program, or predates the op, answers
    ``bad_request``): the host's limit, not the bridge's failure, so the run is not applicable,
    unless the step expects that."""
    kind = (record.error or {}).get("kind")
    expected = step.expect is not None and step.expect.error is not None
    return record.ok is False and kind == "bad_request" and not expected


def _report_env(env: dict[str, str]) -> dict[str, str | None]:
    shown = {k: v for k, v in env.items()
             if k in ("HOME", "PATH") or k.startswith(("MEMPALACE_", "PALACE_"))}
    return redact_env(shown)


def combined_process_facts(records: list[dict[str, Any]], aside: list[dict[str, Any]],
                           alive: Callable[[int], bool]) -> dict[str, Any]:
    """The full server's process facts; the other servers' children (profile ``servers``)
    count only as orphans: alive is alive, whichever server it is."""
    facts = process_facts(records, alive)
    if aside:
        facts["alive"] += process_facts(aside, alive)["alive"]
    return facts


def first_process_facts(records: list[dict[str, Any]], aside: list[dict[str, Any]],
                        alive: Callable[[int], bool] = procs.alive
                        ) -> tuple[dict[str, Any], bool]:
    """The process facts right after the last step, and whether what is alive in them is only
    grandchildren (which get :data:`DESCENDANT_GRACE_MS`), from one look at each process.
    Looked at twice, a grandchild that ended between the looks was counted alive in the facts
    but not in the question, so it got no grace to be seen gone: a clean bridge failed (CI,
    2026-12-07, ``life.shutdown.grandchild-dies-with-child`` under load)."""
    seen = functools.cache(alive)
    facts = combined_process_facts(records, aside, seen)
    return facts, facts["alive"] == len(live_descendants(records, seen))


class _Execution:
    def __init__(self, scenario: Scenario, transport: str, options: RunOptions) -> None:
        self.original = scenario
        self.transport = transport
        self.options = options
        self.world: World | None = None
        self.driver: TranslatedDriver | None = None
        self.fake: FakeClient | None = None
        self.steps: list[StepRecord] = []
        self.step_tools: dict[int, list[dict[str, Any]] | None] = {}
        self.host_restarted = ""  # why the host was started a second time (see _start_host)
        #: the scenario's names to the bridge's and back (the identity without a profile)
        self.translation = translation_for(options.profile, scenario.subject)
        self.paced = pace.Paced(scenario)  # pace values the bridge lacks dropped (adapt)
        self.result = ScenarioResult(scenario=scenario.id, transport=transport, status="passed",
                                     title=scenario.title, covers=scenario.covers,
                                     path=str(scenario.path), level=options.level,
                                     subject=scenario.subject)

    # -- outcomes that end a run early ---------------------------------------------------------

    def _not_testable(self, why: str) -> ScenarioResult:
        self.result.status = NOT_TESTABLE
        self.result.reason = f"Not testable: {why}"
        self.result.steps = self.steps
        self.result.checks.append(CheckRecord(
            scenario=self.original.id, transport=self.transport, pointer="/setup", status=FAIL,
            message=self.result.reason, covers=self.original.covers))
        return self.result

    def _not_applicable(self, why: str) -> ScenarioResult:
        self.result.status = NOT_APPLICABLE
        self.result.reason = f"Not applicable: {why}"
        return self.result

    # -- the run -------------------------------------------------------------------------------

    def run(self, capabilities: Iterable[str] | None) -> ScenarioResult:
        if capabilities is not None:
            why = not_applicable_reason(self.original, self.transport, capabilities,
                                        self.options.detected_capabilities is not None)
            if why:
                return self._not_applicable(why)
        if self.options.level == CORE and scenario_level(self.original) == SEED:
            return self._not_applicable("it checks the seed's conventions only (judge them with "
                                        "--level seed)")
        self.original, self.paced, why = self.translation.adapt(self.original, self.transport)
        if why:
            return self._not_applicable(why)
        why = unmet_reason(self.original, self.transport, self.options.server.traits)
        if why:
            return self._not_applicable(why)
        try:
            self.world = self.options.server.world(self.paced.scenario, self.transport,
                                                   work_root=self.options.work_root,
                                                   warm_start=self.options.warm_start)
            try:
                self.world.open()
            except SetupError as exc:
                return self._not_testable(str(exc))
            if self.original.subject == "fake":
                self.world.seal()
                return self._run_fake()
            try:
                why = self.translation.prepare(self.world)
            except SetupError as exc:
                return self._not_testable(str(exc))
            if why:
                return self._not_applicable(why)
            self.world.seal()
            return self._run_bridge()
        finally:
            self._cleanup()

    def _run_bridge(self) -> ScenarioResult:
        world = self.world
        assert world is not None
        scenario = world.scenario
        tampered = world.tampered()
        if tampered:
            return self._not_testable(tampered)
        try:
            hello = self._start_host(world)
        except DriverFailure as exc:
            return self._not_testable(f"host did not start: {exc}")
        declared = hello.get("capabilities") or ()
        harness = [c for c in HARNESS_CAPABILITIES if c in declared]
        observed = False
        if self.translation.claimed_capabilities is not None:
            declared = (*self.translation.claimed_capabilities, *harness)
        elif self.options.detected_capabilities is not None:
            declared, observed = (*self.options.detected_capabilities, *harness), True
        why = not_applicable_reason(scenario, self.transport, declared, observed)
        if why:
            return self._not_applicable(why)
        for step in scenario.steps_for(self.transport):
            tampered = world.tampered()
            if tampered:
                self.result.steps = self.steps
                return self._not_testable(tampered)
            record = self._step(step)
            self.steps.append(record)
            if step.op == "load" and self._load_failed(step, record):
                reason = record.failure or (record.error or {}).get("message", "load failed")
                return self._not_testable(f"host failed to load the bridge: {reason}")
            if step.op == "reload" and _refused_op(step, record):
                self.result.steps = self.steps
                return self._not_applicable("the host cannot reload its bridge: "
                                            + str((record.error or {}).get("message", "")))
            if step.op == "call_tools" and _refused_op(step, record):
                self.result.steps = self.steps
                return self._not_applicable("the host cannot make concurrent calls: "
                                            + str((record.error or {}).get("message", "")))
            if step.op == "exit" and step.params.get("abrupt") and _refused_op(step, record):
                self.result.steps = self.steps
                return self._not_applicable("the host cannot end without stopping its bridge "
                                            "(driver op 'abandon'): "
                                            + str((record.error or {}).get("message", "")))
            if step.op == "cli" and _refused_op(step, record):
                self.result.steps = self.steps
                return self._not_applicable("the host cannot run its bridge's command-line "
                                            "program: "
                                            + str((record.error or {}).get("message", "")))
        return self._finish(scenario)

    def _load_failed(self, step: Step, record: StepRecord) -> bool:
        explicit = step.expect is not None and (step.expect.ok is not None
                                                or step.expect.error is not None)
        return not explicit and (record.failure is not None or record.ok is False)

    def _step(self, step: Step) -> StepRecord:
        world, driver = self.world, self.driver
        assert world is not None
        record = StepRecord(index=step.index, key=step.key, op=step.op)
        if driver is not None and driver.dead is not None:
            record.failure = f"not run: {driver.dead}"
            return record
        record.journal_start = world.journal_mark()
        record.ran = True
        started = time.monotonic()
        try:
            if step.op == "sleep":
                time.sleep(int(step.params.get("ms", 0)) / 1000)
                record.ok = True
            elif step.op == "server":
                record.request = {"op": "server", **step.params}
                record.ok, record.result, record.error = self._server(step)
            elif step.op == "rpc":
                assert self.fake is not None
                record.request = {"op": "rpc", **step.params}
                deadline = step.timeout_ms or self.options.op_timeout_ms
                record.ok, record.result, record.error = self.fake.send(dict(step.params),
                                                                        deadline)
            elif step.op == "http":
                assert self.fake is not None
                record.request = {"op": "http", **step.params}
                deadline = step.timeout_ms or self.options.op_timeout_ms
                record.ok, record.result, record.error = self.fake.request(step.params, deadline)
            else:
                self._host_step(step, record)
        except DriverFailure as exc:
            record.failure = str(exc)
        if record.elapsed_ms is None:
            record.elapsed_ms = (time.monotonic() - started) * 1000.0
        record.window = (started, time.monotonic())
        record.journal_end = world.journal_mark()
        if step.expect is not None and step.expect.tools is not None:
            self.step_tools[step.index] = self._tools_after(step, record)
        return record

    def _server(self, step: Step) -> Outcome:
        """A ``server`` step: the runner's own stdio child (fake subject) or the world's."""
        action = step.params.get("action")
        if self.fake is not None and self.transport == "stdio":
            if action == "kill":
                signum = SIGNALS.get(str(step.params.get("signal", "SIGKILL")), signal.SIGKILL)
                return self.fake.kill(signum)
            if action == "close_stdin":
                return self.fake.close_stdin(step.timeout_ms or CLOSE_STDIN_WAIT_MS)
        if action == "close_stdin":
            return False, None, {"kind": "bad_request", "message": "close_stdin needs a fake "
                                 "subject on stdio (the runner's own child)"}
        assert self.world is not None
        return self.world.server_action(step)

    def _host_step(self, step: Step, record: StepRecord) -> None:
        assert self.driver is not None and self.world is not None
        request = step.driver_request()
        deadline = op_deadline(step, self.options)
        if step.timeout_ms is None:  # the runner's own deadline follows the bridge's pace
            deadline += self.paced.deadline_extra_ms
        request["timeout_ms"] = deadline
        if step.op == "load":
            request.update(env=self.world.env, cwd=str(self.world.root), options={})
        elif step.op == "cli":  # the program gets the environment a load would
            request.update(env=self.world.env, cwd=str(self.world.root))
        op = request.pop("op")
        if op == "exit" and request.pop("abrupt", False):
            op = ABANDON  # the host ends with no stop of its own (DRIVER.md, ``abandon``)
        request = self.driver.outgoing(op, request)
        record.request = {"op": op, **request}
        if "env" in record.request and op in ("load", "cli"):
            record.request["env"] = _report_env(self.world.env)
        if op == "settle":
            self._settle(step, request, record)
            return
        reply = self.driver.request(op, request, deadline_ms=deadline)
        _fill(record, reply)
        if op == "exit" or (op == ABANDON and reply.ok):
            # the step lasts until the host's process has ended
            record.elapsed_ms = reply.elapsed_ms + self.driver.wait_ended(op, deadline)

    def _settle(self, step: Step, request: dict[str, Any], record: StepRecord) -> None:
        """One host settle, or an event-driven one when the step's expectations allow it
        (``verdict.early_end``: the rule; ``execution.settle``: how it waits)."""
        assert self.driver is not None and self.world is not None
        request.pop("until", None)  # the runner's own: how long to wait, not the host's business
        condition = SettleCondition.for_step(step, self.transport, self.translation.catalogue)
        if condition is None:
            reply = self.driver.request("settle", request, deadline_ms=request["timeout_ms"])
            _fill(record, reply)
            record.ended_by = window_end(reply, float(request["max_ms"]))
            return
        settled = settled_step(step, self.steps)  # its window is this settle's too
        world = self.world
        start = settled.journal_start if settled is not None else record.journal_start
        EventSettle(self.driver.client, request, condition,
                    journal=lambda: world.journal_since(start),
                    effects_view=self.translation.effects, tools_view=self.translation.tools,
                    prior_effects=settled.effects if settled is not None else ()).run(record)

    def _tools_after(self, step: Step, record: StepRecord) -> list[dict[str, Any]] | None:
        """The registered tools after a step (a ``list_tools`` request; an rpc reply's tools)."""
        if step.op == "rpc":
            reply = record.result if isinstance(record.result, dict) else {}
            tools = (reply.get("result") or {}).get("tools") if isinstance(reply, dict) else None
            return list(tools) if isinstance(tools, list) else None
        return self._list_tools(record)

    def _list_tools(self, record: StepRecord | None) -> list[dict[str, Any]] | None:
        driver = self.driver
        if driver is None or driver.dead is not None:
            return None
        try:
            reply = driver.request("list_tools", {"timeout_ms": LIST_TOOLS_TIMEOUT_MS},
                                   deadline_ms=LIST_TOOLS_TIMEOUT_MS)
        except DriverFailure:
            return None
        if record is not None:  # async effects that came in meanwhile
            record.effects.extend(reply.effects)
        if not reply.ok or not isinstance(reply.result, list):
            return None
        return [t for t in reply.result if isinstance(t, dict)]

    def _run_fake(self) -> ScenarioResult:
        assert self.world is not None
        try:
            self.fake = FakeClient(self.world)
        except OSError as exc:
            return self._not_testable(f"cannot start the fake: {exc}")
        for step in self.world.scenario.steps_for(self.transport):
            tampered = self.world.tampered()
            if tampered:
                self.result.steps = self.steps
                return self._not_testable(tampered)
            self.steps.append(self._step(step))
        return self._finish(self.world.scenario)

    # -- judging -------------------------------------------------------------------------------

    def _finish(self, scenario: Scenario) -> ScenarioResult:
        world = self.world
        assert world is not None
        final_tools = None
        final_error = ""
        if scenario.expect.tools is not None:
            last = self.steps[-1] if self.steps else None
            final_tools = self._list_tools(last)
            if final_tools is None:
                dead = self.driver.dead if self.driver is not None else None
                final_error = f"could not list the tools at the end: {dead or 'no answer'}"
        records, offsets = world.read_journal()
        retried = self.translation.set_aside_read_retries(scenario, self.transport, self.steps,
                                                          records, offsets)
        aside = self.translation.other_servers(records, offsets)
        facts, only_descendants = first_process_facts(records, aside)
        exited = any(step.op == "exit" and step.ran for step in self.steps)
        if facts["alive"] and self.options.level == CORE and scenario.subject != "fake":
            facts = self._facts_after_grace(CORE_PROCESS_GRACE_MS)
            if facts["alive"] and not exited:
                facts = self._facts_after_host_exit(facts)
        elif facts["alive"] and (exited or only_descendants):
            facts = self._facts_after_grace(DESCENDANT_GRACE_MS)
        if exited:
            facts["after"] = "the host's exit"  # what the judge's message says they outlived
        teardown = self._exit_host()
        if teardown is not None:
            self.steps.append(teardown)
        for step in self.steps:  # byte offsets -> record indexes
            step.journal_start = _index_at(offsets, step.journal_start)
            step.journal_end = _index_at(offsets, step.journal_end)
        host_stderr = self.driver.stderr_text() if self.driver is not None else ""
        self.result.host_stderr = host_stderr
        self.result.env = _report_env(world.env)
        self.result.journal = records
        self.result.steps = self.steps
        journal_text = (world.journal.read_text(errors="replace") if world.journal.exists()
                        else "")
        secret_texts = wire_texts(journal_text, records, self.steps, host_stderr,
                                  self.options.host_argv)
        observation = Observation(scenario=scenario, transport=self.transport, steps=self.steps,
                                  journal=records, step_tools=self.step_tools,
                                  final_tools=final_tools, final_tools_error=final_error,
                                  facts=facts, secret_texts=secret_texts,
                                  catalogue=self.translation.catalogue,
                                  errors_channel=self.translation.errors_channel,
                                  slack_factor=self.options.slack_factor,
                                  stop_allowance_ms=self.options.server.stop_allowance_ms,
                                  lateness=(self.options.lateness.allowance_ms
                                            if self.options.lateness is not None else None),
                                  palace_start_ms=self.options.server.palace_start_ms)
        tampered = world.tampered()
        if tampered:  # whatever the run showed, it ran with the runner's own files changed
            return self._not_testable(tampered)
        unreached = unreached_reason(scenario, self.transport, self.steps, records,
                                     self._drained_host_stderr)
        if unreached is not None:  # one line instead of every expectation failing alike
            return self._not_testable(unreached)
        self.result.checks = judge(observation)
        retried += self.translation.notes(aside, process_facts(aside, procs.alive)["alive"]
                                          if aside else 0)
        notes = [("/profile", note) for note in retried]
        if self.host_restarted:
            notes.append(("/setup", self.host_restarted))
        # the real server's measured start, where it counted
        notes += [("/server", note) for note in world.server_notes]
        if self.paced.changes:
            notes.append(("/env_pace", self.paced.note))
        self.result.checks += [CheckRecord(
            scenario=scenario.id, transport=self.transport, pointer=pointer, status=PASS,
            message=message, covers=scenario.covers, level=CORE) for pointer, message in notes]
        self.result.status = scenario_status(self.result.checks, self.options.level)
        failures = self.result.failures
        if failures:
            first = failures[0]
            self.result.reason = f"{first.pointer}: {first.message}"
        self.result.outcome = normalise.outcome(
            self.steps, normalise.replacement_list(world.values))
        return self.result

    def _facts_after_grace(self, grace_ms: int) -> dict[str, Any]:
        """Process facts once the children still alive after the last step have had
        ``grace_ms`` more to go: ``CORE_PROCESS_GRACE_MS`` at the core level (no orphan, whatever
        the order), ``DESCENDANT_GRACE_MS`` at any level when only grandchildren are left (a
        bridge can signal them, but cannot wait for them: they are not its children) or when an
        ``exit`` step ended the host (what it SIGKILLed on its way out ends a moment later).

        Taken before the runner's own ``exit`` all the same: a host kills what is left when it
        exits, so after it every child is gone and an orphan could not be told from a clean stop.
        A scenario whose last step is ``exit`` asks exactly that: no child may outlive the host
        (LIFE-06), however the host and its bridge share the work. The
        journal is read again so that a child that exited meanwhile counts as exited, not as
        SIGKILLed; the journal checks still judge the records up to the end of the last step.
        """
        world = self.world
        assert world is not None
        deadline = time.monotonic() + grace_ms / 1000.0
        while True:
            records, _ = world.read_journal()
            aside = self.translation.other_servers(records)
            facts = combined_process_facts(records, aside, procs.alive)
            if not facts["alive"] or time.monotonic() >= deadline:
                return facts
            time.sleep(PROCESS_POLL_MS / 1000.0)

    def _facts_after_host_exit(self, before: dict[str, Any]) -> dict[str, Any]:
        """At the core level a child still alive after the last step and its grace, while the
        host lives, may be one kept warm across ``session_shutdown``: the host is told to exit
        first, and what outlives it (plus the grace) is the orphan. Only that count is taken
        after the exit: spawns and signals stay those of ``before``, so what the host's own
        last-resort SIGKILL at exit ends (DRIVER.md, ``exit``) is never the bridge's kill."""
        record = self._exit_host()
        if record is not None:
            self.steps.append(record)
            if self.driver is not None and self.driver.dead is None:
                # killed at the deadline: what it left is judged all the same
                with contextlib.suppress(DriverFailure):
                    self.driver.wait_ended("exit", EXIT_TIMEOUT_MS)
        after = self._facts_after_grace(CORE_PROCESS_GRACE_MS)
        return {**before, "alive": after["alive"],
                "after": "the host's exit (a child kept after session_shutdown may live as long "
                         "as the host)"}

    def _drained_host_stderr(self) -> str:
        """All the host wrote to stderr: it was told to exit, so let it end and its pump drain."""
        if self.driver is not None:
            self.driver.close()
            self.result.host_stderr = self.driver.stderr_text()
        return self.result.host_stderr

    def _exit_host(self) -> StepRecord | None:
        driver = self.driver
        if driver is None or driver.dead is not None:
            return None
        record = StepRecord(index=-1, key=TEARDOWN_KEY, op="exit", ran=True)
        try:
            _fill(record, driver.client.request("exit", {"timeout_ms": EXIT_TIMEOUT_MS},
                                                deadline_ms=EXIT_TIMEOUT_MS))
        except DriverFailure as exc:
            record.failure = str(exc)
        return record

    # -- cleanup -------------------------------------------------------------------------------

    def _start_host(self, world: World) -> dict[str, Any]:
        """Start the host and take its hello. No bridge is loaded before hello, so a host that
        is silent past the deadline or dies before hello is the machine's lateness, not the
        bridge's: it is started once more (noted in the result) before the run is not testable."""
        try:
            return self._hello(world, warm=self.options.warm_start)
        except DriverFailure as exc:
            if exc.kind not in (HOST_DEADLINE, HOST_EXITED):
                raise
            self.host_restarted = f"the host was started twice; the first time: {exc}"
        return self._hello(world, warm=False)

    def _hello(self, world: World, *, warm: bool) -> dict[str, Any]:
        if self.driver is not None:
            self.driver.close()
        self.driver = TranslatedDriver(
            DriverClient(self.options.host_argv, env=world.env, cwd=world.root,
                         stderr_path=world.host_stderr, grace_ms=self.options.grace_ms,
                         warm=warm), self.translation)
        self.driver.start()
        return self.driver.hello(self.options.hello_timeout_ms)

    def _cleanup(self) -> None:
        start = time.monotonic()
        if self.driver is not None:
            self.driver.close()
            if not self.result.host_stderr:
                self.result.host_stderr = self.driver.stderr_text()
        if self.fake is not None:
            self.fake.close()
        if self.world is not None:
            self._keep_artifacts()
            self.world.close()
        self.result.duration_ms += (time.monotonic() - start) * 1000.0

    def _keep_artifacts(self) -> None:
        world = self.world
        if self.options.artifacts is None or world is None:
            return
        try:  # named after the scenario: confined like every path built from a fixture's text
            target = paths.confine(self.options.artifacts, Path(self.original.id, self.transport),
                                   "scenario id")
        except paths.PathEscape:
            return  # nothing kept: result.artifacts stays None
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True, exist_ok=True)
        # the report dir travels as a whole (CI artifacts): its copies hold no secret either,
        # even when a run is interrupted before any report is written
        redactor = Redactor([*scenario_secrets(self.original.raw), *environment_secrets()],
                            shapes=True)
        for source in (world.journal, world.host_stderr, world.fake_stderr, world.plan,
                       world.state):
            if source.exists():
                # bytes kept as they were (surrogateescape): a stderr need not be UTF-8
                text = source.read_bytes().decode("utf-8", "surrogateescape")
                (target / source.name).write_bytes(
                    redactor.text(text).encode("utf-8", "surrogateescape"))
        self.result.artifacts = str(target)
        # one line: json's C encoder (an indent takes the pure-Python one, ~10x the CPU: a
        # third of the runner's own CPU in a catalogue run; docs/runner.md)
        (target / "result.json").write_text(redactor.text(
            json.dumps(self.result.to_json(), default=str)), encoding="utf-8")


def _fill(record: StepRecord, reply: Reply) -> None:
    record.ok = reply.ok
    record.result = reply.result
    record.error = reply.error
    record.effects = list(reply.effects)
    record.host_ms = reply.host_ms
    record.elapsed_ms = reply.elapsed_ms


def _index_at(offsets: list[int], byte_offset: int) -> int:
    """How many records start before ``byte_offset``."""
    low, high = 0, len(offsets)
    while low < high:
        middle = (low + high) // 2
        if offsets[middle] < byte_offset:
            low = middle + 1
        else:
            high = middle
    return low


def run_scenario(scenario: Scenario, transport: str, options: RunOptions,
                 capabilities: Iterable[str] | None = None) -> ScenarioResult:
    """Run ``scenario`` on ``transport``; never raises for anything the bridge or fake does."""
    started = time.monotonic()
    execution = _Execution(scenario, transport, options)
    result = execution.run(capabilities)
    result.duration_ms = (time.monotonic() - started) * 1000.0
    return result
