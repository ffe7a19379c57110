"""Judge a finished run: every expectation of the scenario becomes one or more check records.

The evaluation vocabulary (matchers, the six checks, tools, processes, secrets) lives in
``scenarios.matching`` and ``scenarios.checks``; this module only decides *what* each expectation
is judged against (the step's reply, its effects, the journal records it caused, ...) and words the
record so it says expected versus got. An expectation that could not be judged (the step never
ran) is a failure, never a silent pass.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from palace_conformance.contract import HOST_ERROR_KINDS, HOST_ONLY_OPS, call_outcomes
from palace_conformance.resources import tool_catalogue
from palace_conformance.runner.results import CORE, FAIL, PASS, SEED, CheckRecord, StepRecord
from palace_conformance.runner.verdict.citations import check_covers
from palace_conformance.runner.verdict.early_end import settled_step
from palace_conformance.runner.verdict.levels import check_level, scenario_level
from palace_conformance.runner.verdict.normalise import _NOT_JSON, parse_text
from palace_conformance.runner.verdict.surfaced import NO_DATA, SurfacedError, surfaced_error
from palace_conformance.scenarios.checks import (
    START_ALLOWANCE,
    Lateness,
    Verdict,
    evaluate,
    evaluate_processes,
    evaluate_tools,
    leaked_secrets,
    start_allowance,
)
from palace_conformance.scenarios.matching import json_equal, why_not
from palace_conformance.scenarios.model import (
    Check,
    ProcessesExpect,
    Scenario,
    Step,
    StepExpect,
    Timing,
    ToolsExpect,
)

#: profile ``channels.errors`` value that holds a bridge to thrown errors
THROW = "throw"
_TOOLS_FIELDS = ("registered", "includes", "excludes", "schemas", "order")


@dataclass
class Observation:
    """Everything a run showed, ready to be judged."""

    scenario: Scenario
    transport: str
    steps: list[StepRecord]
    journal: list[dict[str, Any]]
    step_tools: dict[int, list[dict[str, Any]] | None] = field(default_factory=dict)
    final_tools: list[dict[str, Any]] | None = None
    final_tools_error: str = ""
    facts: dict[str, Any] | None = None
    secret_texts: list[str] = field(default_factory=list)
    #: what "catalogue" means in a tools expectation (a curated bridge's set); None: the whole
    catalogue: list[dict[str, Any]] | None = None
    #: how the bridge reports a failed call (profile ``channels.errors``): "throw" holds it to
    #: thrown errors; otherwise an isError result is read as the error it reports (surfaced.py)
    errors_channel: str | None = None
    #: ``run --slack-factor``: every declared slack (``slack_ms``) is multiplied by it
    slack_factor: float = 1.0
    #: added to the upper bound of a stdio ``shutdown`` or ``reload``: the palace server's own
    #: stop (``PalaceServer.stop_allowance_ms``; 0 for the fake)
    stop_allowance_ms: int = 0
    #: the machine's measured lateness over a window (the run's timer probe,
    #: execution/lateness.py), added to a journal gap's upper bound and to a step's
    #: ``elapsed_ms`` upper bound (over the step's window); None: nothing added
    lateness: Lateness | None = None
    #: added to the upper bound of a step's ``elapsed_ms`` or a journal gap across a palace's
    #: start: the palace server's own start (``PalaceServer.palace_start_ms``, measured at the
    #: run's beginning; 0 for the fake)
    palace_start_ms: int = 0


def _brief(value: Any, limit: int = 100) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_check(check: Check) -> str:
    raw = check.raw
    kind = check.kind
    if kind == "sequence":
        text = f"sequence of {len(raw['items'])} record(s)"
    elif kind in ("count", "absent"):
        text = f"{kind} {_brief(raw['match'])}"
    elif kind == "order":
        text = f"order {_brief(raw['first'], 60)} then {_brief(raw['then'], 60)}"
    elif kind == "distinct":
        text = f"distinct {raw['field']} of {_brief(raw['match'], 70)}"
    elif kind == "gap":
        text = f"gap {_brief(raw['from'], 60)} -> {_brief(raw['to'], 60)}"
    else:
        text = kind
    comment = raw.get("comment")
    return f"{text} ({comment})" if comment else text


def step_view(step: StepRecord) -> Any:
    """The result a ``result`` matcher sees: for ``call_tool`` (and each call of a
    ``call_tools``) plus ``json`` (content[0].text parsed, when it parses); for ``cli`` plus
    ``json`` (stdout parsed, when it holds one JSON object or array)."""
    result = step.result
    if step.op == "cli" and isinstance(result, dict) and isinstance(result.get("stdout"), str):
        parsed = parse_text(result["stdout"])
        return result if parsed is _NOT_JSON else {**result, "json": parsed}
    if step.op == "call_tool" and isinstance(result, dict):
        content = result.get("content")
        if isinstance(content, list) and content and isinstance(content[0], dict):
            text = content[0].get("text")
            if isinstance(text, str):
                parsed = parse_text(text)
                if parsed is not _NOT_JSON:
                    return {**result, "json": parsed}
    return result


class _Recorder:
    def __init__(self, scenario: Scenario, transport: str) -> None:
        self.scenario = scenario
        self.transport = transport
        self.level = scenario_level(scenario)  # each check's level starts from it
        self.records: list[CheckRecord] = []

    def add(self, pointer: str, passed: bool, message: str, *, step: str | None = None,
            expected: Any = None, got: Any = None, seed: bool = False) -> None:
        """One record; ``seed``: a seed convention whatever the pointer's own level."""
        level = check_level(self.level, self.scenario.raw, pointer)
        self.records.append(CheckRecord(
            scenario=self.scenario.id, transport=self.transport, pointer=pointer,
            status=PASS if passed else FAIL, message=message, step=step,
            covers=check_covers(self.scenario, pointer), expected=expected, got=got,
            level=SEED if seed and level == CORE else level))

    def verdict(self, pointer: str, what: str, verdict: Verdict, *, step: str | None = None,
                expected: Any = None) -> None:
        self.add(pointer, verdict.passed, f"{what}: {verdict.detail}", step=step,
                 expected=expected)


def _reply_pointers(expect: StepExpect, at: str) -> list[str]:
    """The pointers of an expectation's ``ok``, ``error`` and ``result`` (a step's or a call's)."""
    pointers = []
    if expect.ok is not None:
        pointers.append(f"{at}/ok")
    if expect.error is not None:
        error = expect.error
        pointers += [f"{at}/error/{name}" for name, present in (
            ("kind", error.kind is not None), ("code", error.code is not None),
            ("message_contains", bool(error.message_contains)), ("data", error.has_data))
            if present]
    if expect.has_result:
        pointers.append(f"{at}/result")
    return pointers


def expectation_pointers(step: Step) -> list[str]:
    """Every pointer a step's ``expect`` judges, for reporting a step that never ran."""
    expect = step.expect
    if expect is None:
        return []
    at = f"/steps/{step.index}/expect"
    pointers = _reply_pointers(expect, at)
    for index, call in enumerate(expect.calls):
        pointers += _reply_pointers(call, f"{at}/calls/{index}")
    pointers += [f"{at}/effects/{i}" for i in range(len(expect.effects))]
    pointers += [f"{at}/journal/{i}" for i in range(len(expect.journal))]
    if expect.tools is not None:
        pointers += [f"{at}/tools/{name}" for name in _TOOLS_FIELDS
                     if getattr(expect.tools, name) not in (None, ())]
    if expect.elapsed_ms is not None:
        pointers.append(f"{at}/elapsed_ms")
    return pointers


def _expected_kinds(step: Step) -> set[str]:
    return _expected_kinds_of(step.expect)


def _expected_kinds_of(expect: StepExpect | None) -> set[str]:
    error = expect.error if expect is not None else None
    return {error.kind} if error is not None and error.kind else set()


def judge(observation: Observation) -> list[CheckRecord]:
    """Check records for every step expectation and every scenario expectation."""
    scenario = observation.scenario
    recorder = _Recorder(scenario, observation.transport)
    records = {s.index: s for s in observation.steps}
    for step in scenario.steps_for(observation.transport):
        record = records.get(step.index)
        if record is None:  # cannot happen for a run the executor finished; stay loud anyway
            record = StepRecord(step.index, step.key, step.op, failure="the runner lost this step")
        _judge_step(recorder, step, record, observation)
    _judge_scenario(recorder, observation)
    return recorder.records


def _judge_step(recorder: _Recorder, step: Step, record: StepRecord,
                observation: Observation) -> None:
    key = step.key
    at = f"/steps/{step.index}"
    if not record.ran or record.failure is not None:
        why = record.failure or "the step did not run"
        recorder.add(at, False, f"{step.op}: {why}", step=key)
        for pointer in expectation_pointers(step):
            recorder.add(pointer, False, f"not judged: {why}", step=key)
        return
    kind = (record.error or {}).get("kind")
    host_failed = kind in HOST_ERROR_KINDS or step.op in HOST_ONLY_OPS
    if record.ok is False and host_failed and kind not in _expected_kinds(step):
        recorder.add(at, False, f"{step.op}: the host could not complete the op: "
                     f"{kind}: {(record.error or {}).get('message', '')}", step=key,
                     got=record.error)
    else:
        outcome = "ok" if record.ok else f"ok: false ({kind})"
        recorder.add(at, True, f"{step.op} completed: {outcome}", step=key)
    if step.op == "call_tools":
        _judge_call_outcomes(recorder, step, record)
    expect = step.expect
    if expect is None:
        return
    at = f"{at}/expect"
    _judge_reply(recorder, at, key, expect, record, observation)
    if step.op == "call_tools" and expect.calls:
        _judge_calls(recorder, at, key, expect.calls, record, observation)
    settled = settled_step(step, observation.steps)
    effects = [*settled.effects, *record.effects] if settled is not None else record.effects
    for index, check in enumerate(expect.effects):
        if check.applies_to(observation.transport):
            recorder.verdict(f"{at}/effects/{index}", f"effects {describe_check(check)}",
                             evaluate(check, effects, slack_factor=observation.slack_factor,
                                      lateness=observation.lateness),
                             step=key, expected=dict(check.raw))
    start = settled.journal_start if settled is not None else record.journal_start
    window = observation.journal[start:record.journal_end]
    for index, check in enumerate(expect.journal):
        if check.applies_to(observation.transport):
            recorder.verdict(f"{at}/journal/{index}", f"journal {describe_check(check)}",
                             evaluate(check, window, slack_factor=observation.slack_factor,
                                      lateness=observation.lateness,
                                      start_allowance_ms=observation.palace_start_ms),
                             step=key, expected=dict(check.raw))
    if expect.tools is not None:
        _judge_tools(recorder, f"{at}/tools", key, expect.tools,
                     observation.step_tools.get(step.index), "could not list the tools",
                     observation.catalogue)
    if expect.elapsed_ms is not None:
        ms = record.elapsed_ms
        factor = observation.slack_factor
        allowance, why = _server_allowance(step, observation,
                                           observation.journal[start:record.journal_end])
        late = _step_lateness(expect.elapsed_ms, record, observation)
        passed = ms is not None and expect.elapsed_ms.admits(ms, factor, allowance, late_ms=late)
        shown = f"{ms:.0f} ms" if ms is not None else "no duration"
        bounds = expect.elapsed_ms.describe(factor, allowance, late_ms=late, allowance=why)
        recorder.add(f"{at}/elapsed_ms", passed, f"took {shown}; expected {bounds}",
                     step=key,
                     expected=dataclasses.asdict(expect.elapsed_ms),
                     got=round(ms, 1) if ms is not None else None)


def _step_lateness(timing: Timing, record: StepRecord, observation: Observation) -> int:
    """What the machine's measured lateness adds to a step's ``elapsed_ms`` upper bound: the
    run's timer probe over the step's window, as a journal gap gets over its own (nothing for
    a duration with no upper bound, a run without a probe or a step without a window)."""
    if observation.lateness is None or record.window is None or timing.slack_ms is None:
        return 0
    return observation.lateness(*record.window)


def _server_allowance(step: Step, observation: Observation,
                      window: Sequence[Mapping[str, Any]]) -> tuple[int, str]:
    """What the palace server adds to a step's ``elapsed_ms`` upper bound, and its name: its
    stop for a stdio ``shutdown``/``reload``, its measured start when a palace started during
    the step (the fake: nothing)."""
    parts: list[tuple[int, str]] = []
    if step.op in ("shutdown", "reload") and observation.transport == "stdio":
        parts.append((observation.stop_allowance_ms, "the server's stop"))
    parts.append((start_allowance(window, observation.palace_start_ms), START_ALLOWANCE))
    parts = [(ms, why) for ms, why in parts if ms]
    if len(parts) == 1:
        return parts[0]
    return (sum(ms for ms, _ in parts),
            "for " + " and ".join(f"{ms} {why}" for ms, why in parts))


def _judge_reply(recorder: _Recorder, at: str, key: str, expect: StepExpect, record: StepRecord,
                 observation: Observation) -> None:
    """``ok``, ``error`` and ``result`` of a step's reply, or of one call of a ``call_tools``
    (then ``record`` stands for that call, op ``call_tool``)."""
    surfaced = None
    if expect.ok is False and record.ok and observation.errors_channel != THROW:
        surfaced = surfaced_error(record.result) if record.op == "call_tool" else None
    if surfaced is not None:  # the error came back as an isError result: judged as that error
        recorder.add(f"{at}/ok", False,
                     "expected ok false, got an isError tool result (an error surfaced to the "
                     f"agent, which core accepts; the seed throws): {surfaced.message!r}",
                     step=key, expected=False, got=surfaced.as_error(), seed=True)
        if expect.error is not None:
            _judge_surfaced(recorder, f"{at}/error", key, expect.error, surfaced)
    elif expect.ok is not None:
        recorder.add(f"{at}/ok", record.ok == expect.ok,
                     f"expected ok {str(expect.ok).lower()}, got {_ok_text(record)}", step=key,
                     expected=expect.ok, got=record.ok)
    if expect.error is not None and surfaced is None:
        _judge_error(recorder, f"{at}/error", key, expect.error, record)
    if expect.has_result:
        view = step_view(record)
        reason = why_not(expect.result, view)
        recorder.add(f"{at}/result", reason is None,
                     "result matches" if reason is None else f"result: {reason}", step=key,
                     expected=expect.result, got=view if reason is not None else None)


def call_records(record: StepRecord) -> list[StepRecord] | None:
    """Each call of a ``call_tools`` reply as a ``call_tool`` record (its ``ok``, ``result``,
    ``error`` and ``ms``), or None when the reply holds no list of calls."""
    calls = call_outcomes(record.result)
    if calls is None:
        return None
    records = []
    for index, call in enumerate(calls):
        call = call if isinstance(call, dict) else {}
        ms = call.get("ms")
        records.append(StepRecord(
            index=record.index, key=f"{record.key}/calls/{index}", op="call_tool", ran=True,
            ok=call.get("ok") if isinstance(call.get("ok"), bool) else None,
            result=call.get("result"), error=call.get("error"),
            elapsed_ms=float(ms) if isinstance(ms, int | float) else None))
    return records


def _judge_call_outcomes(recorder: _Recorder, step: Step, record: StepRecord) -> None:
    """A ``call_tools`` reply answers every call, and no call failed for a reason of the host's
    (``host_timeout``, ``bad_request``) unless its expectation names that kind."""
    at = f"/steps/{step.index}"
    if not record.ok:
        return  # the op itself failed: the step's own record says so
    calls = call_records(record)
    wanted = len(step.params.get("calls", ()))
    if calls is None or len(calls) != wanted:
        got = "no list of calls" if calls is None else f"{len(calls)} answer(s)"
        recorder.add(f"{at}/calls", False, f"call_tools: {wanted} calls, but the host sent "
                     f"{got}", step=step.key, got=record.result)
        return
    expected = step.expect.calls if step.expect is not None else ()
    for index, call in enumerate(calls):
        kind = (call.error or {}).get("kind")
        wanted_kinds = _expected_kinds_of(expected[index] if index < len(expected) else None)
        if call.ok is False and kind in HOST_ERROR_KINDS and kind not in wanted_kinds:
            recorder.add(f"{at}/calls/{index}", False, f"call {index}: the host could not "
                         f"complete it: {kind}: {(call.error or {}).get('message', '')}",
                         step=step.key, got=call.error)
        elif call.ok is None:
            recorder.add(f"{at}/calls/{index}", False, f"call {index}: the host's answer has "
                         "no ok", step=step.key, got=record.result)


def _judge_calls(recorder: _Recorder, at: str, key: str, expected: Sequence[StepExpect],
                 record: StepRecord, observation: Observation) -> None:
    """Each call's expectation (``expect.calls[i]``) against that call's answer."""
    calls = call_records(record) if record.ok else None
    if calls is None or len(calls) != len(expected):
        why = (f"the op failed: {_ok_text(record)}" if not record.ok
               else "the host's answer does not hold one outcome per call")
        for index, call_expect in enumerate(expected):
            for pointer in _reply_pointers(call_expect, f"{at}/calls/{index}"):
                recorder.add(pointer, False, f"not judged: {why}", step=key)
        return
    for index, (call_expect, call) in enumerate(zip(expected, calls, strict=True)):
        _judge_reply(recorder, f"{at}/calls/{index}", key, call_expect, call, observation)


def _ok_text(record: StepRecord) -> str:
    if record.ok:
        return "true"
    error = record.error or {}
    return f"false ({error.get('kind')}: {error.get('message', '')})"


def _judge_error(recorder: _Recorder, at: str, key: str, expect: Any,
                 record: StepRecord) -> None:
    error = record.error
    if record.ok or error is None:
        got = "the op succeeded" + (f" with {_brief(step_view(record), 80)}"
                                    if record.result is not None else "")
        for name, present in (("kind", expect.kind is not None), ("code", expect.code is not None),
                              ("message_contains", bool(expect.message_contains)),
                              ("data", expect.has_data)):
            if present:
                recorder.add(f"{at}/{name}", False, f"expected an error, but {got}", step=key,
                             expected=getattr(expect, name) if name != "message_contains"
                             else list(expect.message_contains))
        return
    if expect.kind is not None:
        recorder.add(f"{at}/kind", error.get("kind") == expect.kind,
                     f"expected error kind {expect.kind!r}, got {error.get('kind')!r} "
                     f"({error.get('message', '')})", step=key, expected=expect.kind,
                     got=error.get("kind"))
    if expect.code is not None:  # as JSON compares numbers: a boolean is never a code
        recorder.add(f"{at}/code", json_equal(expect.code, error.get("code")),
                     f"expected error code {expect.code}, got {error.get('code')!r}", step=key,
                     expected=expect.code, got=error.get("code"))
    if expect.message_contains:
        message = error.get("message")
        message = message if isinstance(message, str) else ""  # no message holds no text
        missing = [text for text in expect.message_contains if text not in message]
        recorder.add(f"{at}/message_contains", not missing,
                     f"error message {message!r} lacks {missing}" if missing
                     else "error message has every expected text", step=key,
                     expected=list(expect.message_contains), got=message)
    if expect.has_data:
        reason = why_not(expect.data, error.get("data"))
        recorder.add(f"{at}/data", reason is None,
                     "error data matches" if reason is None else f"error data: {reason}",
                     step=key, expected=expect.data, got=error.get("data"))


def _judge_surfaced(recorder: _Recorder, at: str, key: str, expect: Any,
                    error: SurfacedError) -> None:
    """An expected error judged on the isError result that reported it (surfaced.py): what the
    result tells is judged at the check's level; a kind it cannot tell is a seed-level note."""
    got = error.as_error()
    if expect.kind is not None:
        if error.kind is None:
            recorder.add(f"{at}/kind", False,
                         f"expected error kind {expect.kind!r}; an isError result whose text does "
                         f"not tell the kind ({error.message!r}): judged at seed level only",
                         step=key, expected=expect.kind, got=got, seed=True)
        else:
            recorder.add(f"{at}/kind", error.kind == expect.kind,
                         f"expected error kind {expect.kind!r}, got {error.kind!r} (an isError "
                         f"result, kind told by its {error.told_by}: {error.message})", step=key,
                         expected=expect.kind, got=error.kind)
    if expect.code is not None:
        recorder.add(f"{at}/code", json_equal(expect.code, error.code),
                     f"expected error code {expect.code}, got {error.code!r} (an isError result: "
                     "details.error.code, else a code in its text)", step=key,
                     expected=expect.code, got=error.code)
    if expect.message_contains:
        missing = [text for text in expect.message_contains if text not in error.message]
        recorder.add(f"{at}/message_contains", not missing,
                     f"isError result text {error.message!r} lacks {missing}" if missing
                     else "the isError result has every expected text", step=key,
                     expected=list(expect.message_contains), got=error.message)
    if expect.has_data:
        data = None if error.data is NO_DATA else error.data
        reason = why_not(expect.data, data)
        recorder.add(f"{at}/data", reason is None,
                     "error data matches (an isError result)" if reason is None
                     else f"error data (an isError result: details.error.data, else JSON in its "
                          f"text): {reason}", step=key, expected=expect.data, got=data)


def _judge_tools(recorder: _Recorder, at: str, key: str | None, expect: ToolsExpect,
                 tools: Sequence[Mapping[str, Any]] | None, missing: str,
                 offered: Sequence[Mapping[str, Any]] | None = None) -> None:
    catalogue = offered if offered is not None else tool_catalogue()["tools"]
    for name in _TOOLS_FIELDS:
        value = getattr(expect, name)
        if value in (None, ()):
            continue
        if tools is None:
            recorder.add(f"{at}/{name}", False, f"tools {name}: not judged: {missing}", step=key)
            continue
        single = ToolsExpect(**{name: value})
        for verdict in evaluate_tools(single, tools, catalogue):
            recorder.verdict(f"{at}/{name}", f"tools {name}", verdict, step=key,
                             expected=list(value) if isinstance(value, tuple) else value)


def _judge_scenario(recorder: _Recorder, observation: Observation) -> None:
    expect = observation.scenario.expect
    transport = observation.transport
    for index, check in enumerate(expect.journal):
        if check.applies_to(transport):
            recorder.verdict(f"/expect/journal/{index}", f"journal {describe_check(check)}",
                             evaluate(check, observation.journal,
                                      slack_factor=observation.slack_factor,
                                      lateness=observation.lateness,
                                      start_allowance_ms=observation.palace_start_ms),
                             expected=dict(check.raw))
    effects = [e for s in observation.steps for e in s.effects]
    for index, check in enumerate(expect.effects):
        if check.applies_to(transport):
            recorder.verdict(f"/expect/effects/{index}", f"effects {describe_check(check)}",
                             evaluate(check, effects, slack_factor=observation.slack_factor,
                                      lateness=observation.lateness),
                             expected=dict(check.raw))
    if expect.tools is not None:
        _judge_tools(recorder, "/expect/tools", None, expect.tools, observation.final_tools,
                     observation.final_tools_error or "could not list the tools at the end",
                     observation.catalogue)
    if expect.processes is not None:
        _judge_processes(recorder, expect.processes, observation.facts)
    for index, secret in enumerate(expect.wire_secrets):
        leaked = leaked_secrets([secret], observation.secret_texts)
        shown = secret[:4] + "..." if len(secret) > 4 else secret
        recorder.add(f"/expect/wire_secrets/{index}", not leaked,
                     f"secret {shown!r} appears on the wire, in effects, stderr or argv" if leaked
                     else f"secret {shown!r} appears nowhere")


def wire_texts(journal_text: str, journal: Sequence[Mapping[str, Any]],
               steps: Sequence[StepRecord], host_stderr: str,
               host_argv: Sequence[str]) -> list[str]:
    """Everything ``wire_secrets`` are searched in (fixtures/README.md, Scenario expectations).

    The journal file as the fake wrote it; every step's effects, and its result and error (what
    the agent was handed), as JSON; the host's stderr; the argv of every journal record that has
    one (the fake's children, the helper stand-ins) and the host's own argv, as JSON. Requests
    the runner sent are not searched: a scenario hands the bridge its token on purpose.
    """
    return [journal_text,
            json.dumps([e for s in steps for e in s.effects], default=str),
            host_stderr,
            json.dumps([{"result": s.result, "error": s.error} for s in steps], default=str),
            json.dumps([r.get("argv") for r in journal if "argv" in r], default=str),
            json.dumps(list(host_argv))]


def _judge_processes(recorder: _Recorder, expect: ProcessesExpect,
                     facts: Mapping[str, Any] | None) -> None:
    at = "/expect/processes"
    parts: list[tuple[str, ProcessesExpect]] = []
    if expect.spawned is not None:
        parts.append(("spawned", ProcessesExpect(spawned=expect.spawned)))
    for name, bounds in expect.signals.items():
        parts.append((f"signals/{name}", ProcessesExpect(signals={name: bounds})))
    if expect.alive_after_shutdown is not None:
        parts.append(("alive_after_shutdown",
                      ProcessesExpect(alive_after_shutdown=expect.alive_after_shutdown)))
    for where, single in parts:
        if facts is None:
            recorder.add(f"{at}/{where}", False, "processes: not judged: no process facts")
            continue
        for verdict in evaluate_processes(single, facts):
            recorder.verdict(f"{at}/{where}", "processes", verdict)
