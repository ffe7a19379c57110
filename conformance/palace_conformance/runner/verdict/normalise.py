"""Normalised outcomes: what a run showed the agent, minus what legitimately changes between runs.

Two runs of the same scenario (stdio and HTTP, or today and last week) must be comparable value by
value, so volatile things are masked: ids (``id``, ``*_id``), times (``timestamp``, ``created_at``,
ISO date-times inside strings, ...), the palace's replica id (``origin_replica``,
``rep_<hex32>``), and the run's own temp dir and fake URL (replaced by ``${TMP}`` and
``${FAKE_URL}``). Tool results are compared as parsed JSON when their text parses.
Parity compares these outcomes; the exact rules, for other runners, are fixtures/README.md's
"Parity: the normalised outcome" (cases: fixtures/runner-tests/). ``diff`` masks more, by the data
rules of ``runner/compare/volatile.py``, since two bridges (or two runs days apart) differ in more
per-run values than two transports of one run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from palace_conformance import json_pointer
from palace_conformance.contract import call_outcomes
from palace_conformance.runner.results import StepRecord

ID_MASK = "<id>"
TIME_MASK = "<time>"
REPLICA_MASK = "<replica>"
#: a palace's replica id (mempalace 3.11 mints one per palace: each transport's run has its own)
_REPLICA = re.compile(r"(?<![0-9A-Za-z])rep_[0-9a-fA-F]{32}(?![0-9a-fA-F])")
TIME_KEYS = frozenset({"timestamp", "created_at", "updated_at", "filed_at", "date", "time", "hlc",
                       "t", "ms", "elapsed_ms", "host_ms", "pid", "last_seen", "expires_at"})
#: ASCII digits only (Python's ``\d`` takes any Unicode digit, ECMAScript's does not)
_ISO_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
                       r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?")
#: effect kinds a parity comparison looks at. Left out on purpose: ``stderr`` (log lines are the
#: transport's own: a child's exit reason is not an HTTP status) and ``exec`` (feeding runs the
#: exporter only for a local palace, FEED-*, so its helper runs differ by transport by design).
PARITY_EFFECT_KINDS = frozenset({"tool_registered", "command_registered", "message",
                                 "user_message", "injected", "notify", "error"})


def mask_text(text: str, replacements: Sequence[tuple[str, str]]) -> str:
    for value, name in replacements:
        if value:
            text = text.replace(value, name)
    return _REPLICA.sub(REPLICA_MASK, _ISO_TIME.sub(TIME_MASK, text))


def replacement_list(values: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(value, "${NAME}")`` pairs, longest value first so a URL wins over its host part."""
    pairs = [(value, "${" + name + "}") for name, value in values.items() if value]
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


def normalise(value: Any, replacements: Sequence[tuple[str, str]] = (), key: str = "") -> Any:
    """A copy of a JSON value with volatile fields masked (see the module docstring)."""
    if key == "id" or key.endswith("_id"):
        return ID_MASK if value is not None else None
    if key in TIME_KEYS and value is not None and not isinstance(value, dict | list):
        return TIME_MASK
    if key == "origin_replica" and value is not None:
        return REPLICA_MASK
    if isinstance(value, dict):
        return {k: normalise(v, replacements, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, replacements) for v in value]
    if isinstance(value, str):
        return mask_text(value, replacements)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_text(text: str) -> Any:
    """The JSON object or array a tool's text holds, or the :data:`_NOT_JSON` marker.

    Only an object or array counts (a bare ``42`` or ``"x"`` is prose that happens to parse), and
    the parse is strict JSON (no ``NaN``/``Infinity``), so every language reads a text the same.
    """
    stripped = text.strip(" \t\n\r")  # JSON's whitespace only: the same in every language
    if not stripped or stripped[0] not in "[{":
        return _NOT_JSON
    try:
        return json.loads(stripped, parse_constant=_no_constant)
    except ValueError:  # JSONDecodeError is one
        return _NOT_JSON


_NOT_JSON = object()


def tool_result(result: Any, replacements: Sequence[tuple[str, str]] = ()) -> Any:
    """A ``call_tool`` result with each text item's JSON parsed, then masked."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return normalise(result, replacements)
    content = []
    for item in result["content"]:
        if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"),
                                                                                str):
            parsed = parse_text(item["text"])
            if parsed is not _NOT_JSON:
                content.append({"type": "text", "json": normalise(parsed, replacements)})
                continue
        content.append(normalise(item, replacements))
    out = {k: normalise(v, replacements, k) for k, v in result.items() if k != "content"}
    out["content"] = content
    return out


def call_tools_result(result: Any, replacements: Sequence[tuple[str, str]] = ()) -> Any:
    """A ``call_tools`` result as parity sees it: per call its ``ok``, error kind/code/message
    and masked tool result, in order; never its ``ms`` (a duration differs on every run)."""
    calls = call_outcomes(result)
    if calls is None:
        return normalise(result, replacements)
    out = []
    for call in calls:
        if not isinstance(call, dict):
            out.append(normalise(call, replacements))
            continue
        view: dict[str, Any] = {"ok": call.get("ok")}
        error = call.get("error")
        if isinstance(error, dict):
            view["error"] = normalise({k: error[k] for k in ("kind", "code", "message")
                                       if k in error}, replacements)
        if "result" in call:
            view["result"] = tool_result(call["result"], replacements)
        out.append(view)
    return {"calls": out}


def effect_signature(effect: Mapping[str, Any]) -> str:
    """``kind`` or ``kind:custom_type`` (a wake-up and a mailbox message are told apart)."""
    kind = str(effect.get("kind"))
    custom = effect.get("custom_type")
    return f"{kind}:{custom}" if isinstance(custom, str) and custom else kind


def step_outcome(step: StepRecord, replacements: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """One step as parity sees it: ok, error kind/code/message, masked result, effect kinds."""
    out: dict[str, Any] = {"ok": step.ok}
    if step.failure is not None:
        out["failure"] = mask_text(step.failure, replacements)
    if step.error is not None:
        error = {k: step.error[k] for k in ("kind", "code", "message") if k in step.error}
        out["error"] = normalise(error, replacements)
    if step.op == "call_tool":
        out["result"] = tool_result(step.result, replacements)
    elif step.op == "call_tools":
        out["result"] = call_tools_result(step.result, replacements)
    elif step.op == "server":  # pids and signals of the runner's own processes
        out["result"] = None
    else:
        out["result"] = normalise(step.result, replacements)
    out["effects"] = [effect_signature(e) for e in step.effects
                      if e.get("kind") in PARITY_EFFECT_KINDS]
    return out


def outcome(steps: Iterable[StepRecord], replacements: Sequence[tuple[str, str]] = (),
            keys: Iterable[str] | None = None) -> dict[str, Any]:
    """``{"steps": {key: step_outcome}}`` over the steps whose key is in ``keys`` (default all)."""
    wanted = set(keys) if keys is not None else None
    return {"steps": {s.key: step_outcome(s, replacements) for s in steps
                      if s.index >= 0 and (wanted is None or s.key in wanted)}}


def _ignored(pointer: str, ignore: Sequence[str]) -> bool:
    """Whether ``pointer`` is an ignored one or below it (a trailing ``/`` is no extra key)."""
    bases = [p.rstrip("/") for p in ignore]
    return any(pointer == base or pointer.startswith(base + "/") for base in bases)


_ABSENT = object()


def first_difference(left: Any, right: Any, ignore: Sequence[str] = (),
                     where: str = "") -> tuple[str, Any, Any] | None:
    """The first JSON pointer where two values differ (outside ``ignore``), with both values;
    an absent key is reported as ``None`` on its side."""
    if _ignored(where, ignore):
        return None
    if isinstance(left, dict) and isinstance(right, dict):
        for key in [*left, *(k for k in right if k not in left)]:
            found = first_difference(left.get(key, _ABSENT), right.get(key, _ABSENT), ignore,
                                     f"{where}/{json_pointer.escape(str(key))}")
            if found is not None:
                return found
        return None
    if isinstance(left, list) and isinstance(right, list):
        for index in range(max(len(left), len(right))):
            found = first_difference(left[index] if index < len(left) else _ABSENT,
                                     right[index] if index < len(right) else _ABSENT, ignore,
                                     f"{where}/{index}")
            if found is not None:
                return found
        return None
    if _same(left, right):
        return None
    return (where or "/", None if left is _ABSENT else left, None if right is _ABSENT else right)


def _same(left: Any, right: Any) -> bool:
    if left is _ABSENT or right is _ABSENT:
        return left is right
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return bool(left == right) and (isinstance(left, int | float) == isinstance(right, int | float))
