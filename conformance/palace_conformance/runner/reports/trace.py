"""Normalised traces: one run's steps and wire journal with everything volatile canonicalised.

A trace is what a repro bundle shows and what the snapshot tests store, so two runs of the same
scenario against the same bridge must give byte-identical traces. Volatile values are handled in
two ways: things whose *identity* matters (pids, HTTP session ids, JSON-RPC and other ids) are
renamed by order of first appearance (``<pid-1>``, ``<session-2>``, ``<id-3>``), so "the same
child" and "a new session" stay visible; things that only vary (times, durations, the run's temp
dir, loopback ports, secrets, incidental HTTP headers) are masked or dropped. Tool definitions are
shortened to their name and a digest of the rest: a changed schema still shows, as a changed
digest, without 47 schemas in every trace.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import PurePosixPath
from typing import Any

from palace_conformance.contract import call_outcomes
from palace_conformance.runner.results import ScenarioResult, StepRecord
from palace_conformance.runner.verdict.normalise import (
    TIME_KEYS,
    TIME_MASK,
    mask_text,
    replacement_list,
)

TRACE_FORMAT = 1
SECRET_MASK = "<secret>"
#: request fields that describe the runner's budgets or machine, not what the bridge was asked
DROPPED_REQUEST_KEYS = frozenset({"timeout_ms", "env", "cwd", "options"})
#: HTTP headers that vary with the client library, the port or the body size, not the protocol
DROPPED_HEADERS = frozenset({"host", "accept-encoding", "connection", "content-length",
                             "user-agent", "date", "server", "keep-alive", "transfer-encoding"})
#: journal fields that only say when (``t``, a process start's ``created_t``); ``pid`` is
#: renamed instead
DROPPED_JOURNAL_KEYS = frozenset({"t", "created_t"})
_MASKED_TIME_KEYS = TIME_KEYS - {"pid", "id"}
_SESSION_KEYS = frozenset({"session", "mcp-session-id", "session_id"})
_KEPT_ID_KEYS = frozenset({"fault_id"})  # written in the fixture: stable and meaningful
_TOOL_DETAIL_KEYS = ("description", "inputSchema", "parameters", "annotations", "outputSchema")
_LOOPBACK_PORT = re.compile(r"\b(127\.0\.0\.1|localhost|\[::1\]):\d+")
#: ``20261130T065729`` / ``20261130_065702206759``: a clock reading baked into a generated id
_COMPACT_TIME = re.compile(r"(?<!\d)\d{8}[T_]\d{6}\d*(?!\d)")
DATE_MASK = "<date>"


def _is_id_key(key: str) -> bool:
    return (key == "id" or key.endswith("_id")) and key not in _KEPT_ID_KEYS


def run_values(result: ScenarioResult) -> dict[str, str]:
    """The run's own volatile values, recovered from its recorded environment: the temp dir
    (``HOME`` is ``${TMP}/home``) and, on HTTP, the fake's URL."""
    values: dict[str, str] = {}
    home = result.env.get("HOME")
    if home and PurePosixPath(home).name == "home":
        values["TMP"] = str(PurePosixPath(home).parent)
    url = result.env.get("MEMPALACE_REMOTE_URL")
    if result.transport == "http" and url and _LOOPBACK_PORT.search(url):
        values["FAKE_URL"] = url
    return values


class _Names:
    """Stable names for volatile identities, numbered by first appearance per kind."""

    def __init__(self) -> None:
        self.names: dict[str, dict[tuple[str, Any], str]] = {"pid": {}, "session": {}, "id": {}}

    def get(self, kind: str, value: Any) -> str:
        table = self.names[kind]
        token = (type(value).__name__, value)
        if token not in table:
            table[token] = f"<{kind}-{len(table) + 1}>"
        return table[token]

    def text_pairs(self) -> list[tuple[str, str]]:
        """Raw values worth replacing inside free text: session ids and pids (3+ digits)."""
        pairs = [(str(v), name) for (_, v), name in self.names["session"].items()
                 if isinstance(v, str) and len(v) >= 8]
        pairs += [(str(v), name) for (_, v), name in self.names["pid"].items()
                  if isinstance(v, int) and v >= 100]
        return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


def _recent_dates(fixture_text: str = "") -> list[re.Pattern[str]]:
    """Today's date (and its neighbours, for runs across midnight or time zones) as written by
    a run. A date the fixture itself states stays as written, even on that very day."""
    today = datetime.now(UTC).date()
    days = {today + timedelta(days=d) for d in (-1, 0, 1)}
    patterns = []
    for day in sorted(days):
        forms = [f for f in (f"{day:%Y-%m-%d}", f"{day:%Y%m%d}") if f not in fixture_text]
        patterns += [re.compile(rf"(?<!\d){form}(?!\d)") for form in forms]
    return patterns


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _is_tool(value: Mapping[str, Any]) -> bool:
    return isinstance(value.get("name"), str) and ("inputSchema" in value
                                                   or "parameters" in value)


class _Canon:
    def __init__(self, replacements: Sequence[tuple[str, str]], fixture_text: str = "") -> None:
        self.replacements = list(replacements)
        self.names = _Names()
        self._text: list[tuple[str, str]] = []
        self._pid_patterns: list[tuple[re.Pattern[str], str]] = []
        self._dates = _recent_dates(fixture_text)

    def collect(self, value: Any, key: str = "") -> None:
        """First pass: number identities in the order they appear."""
        if key == "pid" and isinstance(value, int):
            self.names.get("pid", value)
        elif key in _SESSION_KEYS and isinstance(value, str):
            self.names.get("session", value)
        elif isinstance(value, dict):
            for k, v in value.items():
                self.collect(v, str(k))
        elif isinstance(value, list):
            for v in value:
                self.collect(v)

    def freeze(self) -> None:
        pairs = self.names.text_pairs()
        self._text = [(raw, name) for raw, name in pairs if not raw.isdigit()]
        self._pid_patterns = [(re.compile(rf"(?<!\d){re.escape(raw)}(?!\d)"), name)
                              for raw, name in pairs if raw.isdigit()]

    def text(self, value: str) -> str:
        value = mask_text(value, self.replacements)
        for raw, name in self._text:
            value = value.replace(raw, name)
        for pattern, name in self._pid_patterns:
            value = pattern.sub(name, value)
        value = _COMPACT_TIME.sub(TIME_MASK, value)
        for pattern in self._dates:
            value = pattern.sub(DATE_MASK, value)
        return _LOOPBACK_PORT.sub(lambda m: f"{m.group(1)}:<port>", value)

    def value(self, value: Any, key: str = "") -> Any:
        """Second pass: a canonical copy."""
        if value is None:
            return None
        if key == "pid" and isinstance(value, int):
            return self.names.get("pid", value)
        if key in _SESSION_KEYS and isinstance(value, str):
            return self.names.get("session", value)
        if _is_id_key(key) and not isinstance(value, dict | list):
            return self.names.get("id", value)
        if key in _MASKED_TIME_KEYS and not isinstance(value, dict | list):
            return TIME_MASK
        if isinstance(value, dict):
            value = _parsed_content(value)
            if _is_tool(value):
                rest = {k: value[k] for k in _TOOL_DETAIL_KEYS if k in value}
                kept = {k: self.value(v, str(k)) for k, v in value.items()
                        if k not in _TOOL_DETAIL_KEYS}
                return {**kept, "digest": _digest(rest)}
            if key == "headers":
                return {k: self.value(v, str(k).lower()) for k, v in value.items()
                        if str(k).lower() not in DROPPED_HEADERS}
            return {k: self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def _parsed_calls(result: Any) -> Any:
    """A ``call_tools`` result with each call's tool result parsed as :func:`_parsed_content`."""
    calls = call_outcomes(result)
    if calls is None:
        return result
    return {**result, "calls": [
        {**call, "result": _parsed_content(call["result"])}
        if isinstance(call, dict) and "result" in call else call for call in calls]}


def _parsed_content(result: Any) -> Any:
    """A tool result with each text item's JSON parsed (read as data, not as an escaped string)."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return result
    content = []
    for item in result["content"]:
        if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"),
                                                                                str):
            text = item["text"].strip()
            if text[:1] in ("{", "["):
                try:
                    content.append({"type": "text", "json": json.loads(text)})
                    continue
                except json.JSONDecodeError:
                    pass
        content.append(item)
    return {**result, "content": content}


def _step(step: StepRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"key": step.key, "op": step.op}
    if not step.ran:
        out["ran"] = False
        if step.failure is not None:
            out["failure"] = step.failure
        return out
    request = {k: v for k, v in step.request.items() if k not in DROPPED_REQUEST_KEYS}
    request.pop("op", None)
    if request:
        out["request"] = request
    out["ok"] = step.ok
    if step.error is not None:
        out["error"] = step.error
    if step.op == "server":
        out["result"] = None  # pids and signals of the runner's own processes
    else:
        out["result"] = (_parsed_content(step.result) if step.op == "call_tool"
                         else _parsed_calls(step.result) if step.op == "call_tools"
                         else step.result)
    if step.effects:
        out["effects"] = step.effects
    if step.failure is not None:
        out["failure"] = step.failure
    return out


def _journal_record(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in DROPPED_JOURNAL_KEYS}


def build_trace(result: ScenarioResult, secrets: Iterable[str] = (),
                fixture: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The normalised trace of one run (``result.journal`` must still be in memory).

    ``secrets`` are literal values (tokens) masked wherever they appear; ``fixture`` is the
    scenario as written, whose own dates are never taken for "today".
    """
    values = run_values(result)
    replacements = replacement_list(values)
    replacements += [(s, SECRET_MASK) for s in sorted(set(secrets), key=len, reverse=True) if s]
    canon = _Canon(sorted(replacements, key=lambda pair: len(pair[0]), reverse=True),
                   json.dumps(fixture, ensure_ascii=False) if fixture is not None else "")
    journal = [_journal_record(r) for r in result.journal]
    steps = [_step(s) for s in result.steps]
    canon.collect(journal)
    canon.collect(steps)
    canon.freeze()
    return {"format": TRACE_FORMAT, "scenario": result.scenario, "transport": result.transport,
            "status": result.status, "steps": canon.value(steps), "journal": canon.value(journal)}


def dumps(trace: Mapping[str, Any]) -> str:
    """The file form: keys sorted, two-space indent, non-ASCII as is, one trailing newline; the
    same bytes as a syrupy JSON snapshot of the trace, so ``diff`` works between the two."""
    return json.dumps(trace, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
