"""The official suite's results as data: each scenario's ``checks.json``, its verdict, the checks
with their per-run values masked, the expected-failure baseline and the comparison of two runs.

No I/O but reading the result files; the suite itself is run by :mod:`.suite`.

A result directory holds one ``server-<scenario>-<ISO time>/`` (server mode) or
``<scenario>-<ISO time>/`` (client mode) per scenario, each with a ``checks.json``: a list of
``{id, name, description, status, timestamp, specReferences, details, errorMessage?}``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERDICTS = ("PASS", "WARN", "FAIL")
_DIR_TIME = re.compile(r"-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d(?:-\d+)?Z$")

#: per-run values: masked before two runs' checks are compared
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\b"), "<time>"),
    (re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT\b"),
     "<date>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
     "<uuid>"),
    (re.compile(r"\b[0-9a-f]{32}\b", re.I), "<hex-id>"),
    (re.compile(r"\b(localhost|127\.0\.0\.1|\[::1\]):\d{1,5}\b"), r"\1:<port>"),
)
#: keys whose values are per-run wherever they appear
_VOLATILE_KEYS = frozenset({"timestamp", "date", "durationMs", "duration", "port"})


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario of one run: its verdict and its checks, as the suite wrote them."""

    scenario: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    directory: str = ""

    @property
    def verdict(self) -> str:
        """FAIL with any FAILURE, WARN with any WARNING, else PASS (INFO checks are traffic)."""
        statuses = {c.get("status") for c in self.checks}
        if "FAILURE" in statuses:
            return "FAIL"
        return "WARN" if "WARNING" in statuses else "PASS"

    @property
    def judged(self) -> tuple[int, int]:
        """(SUCCESS checks, SUCCESS + FAILURE checks): the suite's "n passed" figure."""
        passed = sum(1 for c in self.checks if c.get("status") == "SUCCESS")
        failed = sum(1 for c in self.checks if c.get("status") == "FAILURE")
        return passed, passed + failed


def scenario_name(directory: str, mode: str) -> str:
    """``server-tools-list-2026-...Z`` -> ``tools-list`` (server mode strips ``server-``)."""
    name = _DIR_TIME.sub("", directory)
    return name.removeprefix("server-") if mode == "server" else name


def load_results(out: Path, mode: str) -> dict[str, ScenarioResult]:
    """Every scenario's checks under ``out`` (``auth/`` included in client mode), by name; a
    scenario run twice keeps its newest directory."""
    found: dict[str, ScenarioResult] = {}
    for checks_file in sorted(out.rglob("checks.json")):
        directory = checks_file.parent
        name = scenario_name(directory.name, mode)
        if directory.parent != out:
            name = f"{directory.parent.name}/{name}"
        try:
            checks = json.loads(checks_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{checks_file} is not readable JSON ({exc}); re-run the suite") \
                from None
        if not isinstance(checks, list):
            raise ValueError(f"{checks_file} is not a list of checks; re-run the suite")
        found[name] = ScenarioResult(name, checks, str(directory))
    return found


def mask(value: Any) -> Any:
    """``value`` with its per-run parts replaced: timestamps, dates, ports, UUID and 32-hex ids,
    durations (see :data:`_MASKS`, :data:`_VOLATILE_KEYS`)."""
    if isinstance(value, dict):
        return {k: (f"<{k}>" if k in _VOLATILE_KEYS else mask(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, str):
        for pattern, replacement in _MASKS:
            value = pattern.sub(replacement, value)
        return value
    return value


def compare(left: dict[str, ScenarioResult], right: dict[str, ScenarioResult],
            names: tuple[str, str] = ("left", "right")) -> list[str]:
    """Every difference between two runs, one line each: a scenario only one has, a different
    verdict, or the first differing masked check of a scenario. Empty: identical."""
    lines: list[str] = []
    for scenario in sorted(set(left) | set(right)):
        if scenario not in right:
            lines.append(f"{scenario}: only in {names[0]}")
            continue
        if scenario not in left:
            lines.append(f"{scenario}: only in {names[1]}")
            continue
        a, b = left[scenario], right[scenario]
        if a.verdict != b.verdict:
            lines.append(f"{scenario}: verdict {a.verdict} on {names[0]}, {b.verdict} on "
                         f"{names[1]}")
        masked_a, masked_b = mask(a.checks), mask(b.checks)
        if masked_a == masked_b:
            continue
        if len(masked_a) != len(masked_b):
            lines.append(f"{scenario}: {len(masked_a)} checks on {names[0]}, {len(masked_b)} on "
                         f"{names[1]}")
        for index, (x, y) in enumerate(zip(masked_a, masked_b, strict=False)):
            if x != y:
                lines.append(f"{scenario}: check {index} ({x.get('id')}) differs: "
                             f"{_first_difference(x, y, names)}")
                break
    return lines


def _first_difference(x: Any, y: Any, names: tuple[str, str], path: str = "") -> str:
    if isinstance(x, dict) and isinstance(y, dict):
        for key in sorted(set(x) | set(y), key=str):
            if x.get(key, _ABSENT) != y.get(key, _ABSENT):
                return _first_difference(x.get(key, _ABSENT), y.get(key, _ABSENT), names,
                                         f"{path}/{key}")
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for index, (a, b) in enumerate(zip(x, y, strict=True)):
            if a != b:
                return _first_difference(a, b, names, f"{path}/{index}")
    return (f"{path or '/'}: {names[0]} {_short(x)}, {names[1]} {_short(y)}")


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, _Absent) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 160 else text[:157] + "..."
