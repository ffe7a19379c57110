"""Golden traces: the reference bridge's whole normalised trace of each scenario, kept as data.

A scenario's checks judge what its author thought of; the golden trace holds everything else the
reference showed the palace and the agent (:attr:`.drift_trace.Masks.full`: every request's
head and body, every process's argv and environment, every registration and effect whole), with
the per-run values masked (:mod:`.volatile`). A bridge judged at the seed level must match it in
every category; the first divergence (category, step, field, expected and got) is the failure.

The files are JSON a runner in any language reads: ``fixtures/golden/<tier>/<area>/<id>.json``
mirrors ``fixtures/<tier>/<area>/<id>.json``, one trace per transport. Whole registrations
(descriptions, schemas) repeat across most scenarios, so a trace holds each as a reference
(``{"name": ..., "$registration": "<digest>"}``) into ``fixtures/golden/registrations.json``.
``palace-conformance run --update-golden`` rewrites them from a passing reference run; the change
is reviewed in ``git diff``, and an unreviewed one fails the seed-level run (fixtures/README.md,
"Golden traces").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palace_conformance import json_pointer
from palace_conformance.contract import CAPABILITIES, HARNESS_CAPABILITIES, LOCAL_CAPABILITIES
from palace_conformance.runner.compare.categories import BY_NAME, CATEGORIES, REGISTRATIONS
from palace_conformance.runner.compare.drift_trace import (
    RUN_KEY,
    STARTUP_KEY,
    Masks,
    drift_trace,
)
from palace_conformance.runner.results import (
    FAIL,
    PASS,
    PASSED,
    SEED,
    CheckRecord,
    CheckStatus,
    ScenarioResult,
    scenario_status,
)
from palace_conformance.runner.verdict.normalise import first_difference

GOLDEN_DIR = "golden"
#: the fixture tiers a golden tree mirrors
TIERS = ("scenarios", "slow")
REGISTRY_NAME = "registrations.json"
FORMAT = 1
POINTER = "/golden"
REF_KEY = "$registration"
#: how the full observation is masked: everything observed, the UI included
FULL = Masks(full=True, ui=False)
UPDATE_HINT = ("after reviewing the change, 'palace-conformance run --update-golden --select "
               "{id}' rewrites it")


def golden_root(scenario_path: str | Path) -> tuple[Path, Path] | None:
    """(the golden tree, the file's path relative to it) for a scenario file, or None when its
    fixture tree keeps no golden traces (a scenario written elsewhere, a test's own)."""
    path = Path(scenario_path).resolve()
    for parent in path.parents:
        if parent.name in TIERS and (parent.parent / GOLDEN_DIR).is_dir():
            return parent.parent / GOLDEN_DIR, Path(parent.name) / path.relative_to(parent)
    return None


def observed(result: ScenarioResult) -> dict[str, Any]:
    """A run's whole trace, masked and canonical (keys sorted, as the files hold it). Unlike
    ``diff`` between two bridges, ``{}``, ``null`` and an absent key stay apart: the palace
    tells ``"arguments": {}`` from no arguments, and the seed's copies owe the same bytes."""
    trace = drift_trace(result, FULL)
    canonical: dict[str, Any] = json.loads(json.dumps(trace, sort_keys=True, default=str))
    return canonical


# -- registrations by reference ---------------------------------------------------------------


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _is_registration(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("name"), str) and (
        "description" in value or "parameters" in value or "inputSchema" in value)


def compact(trace: Mapping[str, Any], registry: dict[str, Any]) -> dict[str, Any]:
    """The trace with every whole registration replaced by its reference (added to
    ``registry``)."""

    def walk(value: Any) -> Any:
        if _is_registration(value):
            digest = _digest(value)
            registry[digest] = value
            return {"name": value["name"], REF_KEY: digest}
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    out = dict(trace)
    if REGISTRATIONS in out:
        out[REGISTRATIONS] = walk(out[REGISTRATIONS])
    return out


def expand(trace: Mapping[str, Any], registry: Mapping[str, Any]) -> dict[str, Any]:
    """The trace with every reference replaced by the registration it names (an unknown one
    stays as it is, and so differs from any registration)."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            ref = value.get(REF_KEY)
            if isinstance(ref, str) and ref in registry:
                return registry[ref]
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return {k: walk(v) if k == REGISTRATIONS else v for k, v in trace.items()}


# -- the files ---------------------------------------------------------------------------------


@dataclass
class GoldenStore:
    """One golden tree: its registrations and the scenario files read so far."""

    root: Path
    registry: dict[str, Any] = field(default_factory=dict)
    files: dict[Path, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path) -> GoldenStore:
        registry_path = root / REGISTRY_NAME
        registry: dict[str, Any] = {}
        if registry_path.is_file():
            data = json.loads(registry_path.read_text(encoding="utf-8"))
            registry = dict(data.get("registrations") or {})
        return cls(root, registry)

    def read(self, relative: Path) -> dict[str, Any] | None:
        if relative not in self.files:
            path = self.root / relative
            if not path.is_file():
                return None
            self.files[relative] = json.loads(path.read_text(encoding="utf-8"))
        return self.files[relative]

    def trace(self, relative: Path, transport: str) -> dict[str, Any] | None:
        data = self.read(relative)
        traces = data.get("transports") if isinstance(data, dict) else None
        found = traces.get(transport) if isinstance(traces, dict) else None
        return expand(found, self.registry) if isinstance(found, dict) else None


def _dump(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


@dataclass
class UpdateSummary:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # failed runs: never made golden

    def line(self) -> str:
        refused = (f"; not written, the run failed: {', '.join(self.refused)}"
                   if self.refused else "")
        return (f"golden traces: {len(self.written)} file(s) written, {len(self.unchanged)} "
                f"unchanged{refused} (review with 'git diff fixtures/golden')")


def update(results: Iterable[ScenarioResult]) -> UpdateSummary:
    """Write the golden trace of every passing bridge result into its scenario's golden file
    (the other transport's trace, when not run, is kept); a failing result is never made
    golden."""
    summary = UpdateSummary()
    stores: dict[Path, GoldenStore] = {}
    pending: dict[tuple[Path, Path], dict[str, Any]] = {}
    for result in results:
        if result.subject != "bridge" or result.transport not in ("stdio", "http"):
            continue
        where = golden_root(result.path) if result.path else None
        if where is None:
            continue
        root, relative = where
        store = stores.setdefault(root, GoldenStore.open(root))
        if result.status != PASSED:
            summary.refused.append(f"{result.scenario}[{result.transport}]")
            continue
        key = (root, relative)
        if key not in pending:
            old = store.read(relative) or {}
            pending[key] = {"format": FORMAT, "scenario": result.scenario,
                            "transports": dict(old.get("transports") or {})}
        pending[key]["transports"][result.transport] = compact(observed(result),
                                                               store.registry)
    for (root, relative), data in sorted(pending.items()):
        path = root / relative
        text = _dump(data)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            summary.unchanged.append(str(relative))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        summary.written.append(str(relative))
    for root, store in stores.items():
        registry_path = root / REGISTRY_NAME
        text = _dump({"format": FORMAT, "registrations": store.registry})
        if not registry_path.is_file() or registry_path.read_text(encoding="utf-8") != text:
            registry_path.write_text(text, encoding="utf-8")
    return summary


# -- the judgement -----------------------------------------------------------------------------


@dataclass(frozen=True)
class GoldenDivergence:
    category: str
    step: str
    field: str
    expected: Any
    got: Any
    others: tuple[str, ...]  # the other categories that diverge

    def message(self) -> str:
        title = BY_NAME[self.category].title if self.category in BY_NAME else self.category
        more = (f" (also diverging: {', '.join(self.others)})" if self.others else "")
        return (f"the trace departs from the golden trace: first divergence in {title}, "
                f"{self.step}, at {self.field}: {both(self.expected, self.got)}{more}")


def both(expected: Any, got: Any, limit: int = 160) -> str:
    """``expected X | got Y``; two long texts are shown where they part (a description cut
    at 512 characters shares its first 512 with the whole one)."""
    if isinstance(expected, str) and isinstance(got, str) and max(len(expected),
                                                                 len(got)) > limit // 2:
        at = next((i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
                  min(len(expected), len(got)))
        start = max(0, at - 20)
        return (f"the texts part at character {at} ({len(expected)} characters expected, "
                f"{len(got)} got): expected ...{shown(expected[start:at + 60])} | got "
                f"...{shown(got[start:at + 60])}")
    return f"expected {shown(expected)} | got {shown(got)}"


def shown(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _step_words(key: str, result: ScenarioResult) -> str:
    if key == STARTUP_KEY:
        return "(start-up)"
    if key == RUN_KEY:
        return "(whole run)"
    for step in result.steps:
        if step.key == key and step.index >= 0:
            op = step.op
            if op == "event" and step.request.get("name"):
                op = f"event {step.request['name']}"
            label = f' "{key}"' if key != str(step.index) else ""
            return f"step #{step.index} {op}{label}"
    return f"step {key}"


def _in_step_order(expected: Any, got: Any, result: ScenarioResult
                   ) -> tuple[str, Any, Any] | None:
    """:func:`first_difference` of one category, its steps walked in the run's order (start-up,
    the steps by index, the whole run), not in the file's sorted key order."""
    if not (isinstance(expected, dict) and isinstance(got, dict)
            and isinstance(expected.get("steps"), dict) and isinstance(got.get("steps"), dict)):
        return first_difference(expected, got)
    index = {step.key: step.index for step in result.steps}

    def rank(key: str) -> tuple[int, int, str]:
        if key == STARTUP_KEY:
            return (0, 0, key)
        if key == RUN_KEY:
            return (2, 0, key)
        return (1, index.get(key, len(index)), key)

    a, b = expected["steps"], got["steps"]
    for key in sorted({*a, *b}, key=rank):
        difference = first_difference(a.get(key), b.get(key),
                                      where=f"/steps/{json_pointer.escape(key)}")
        if difference is not None:
            return difference
    return first_difference({k: v for k, v in expected.items() if k != "steps"},
                            {k: v for k, v in got.items() if k != "steps"})


def first_divergence(expected: Mapping[str, Any], got: Mapping[str, Any],
                     result: ScenarioResult) -> GoldenDivergence | None:
    """The first divergence of the first category (in the report's order) that has one."""
    found: list[tuple[str, str, Any, Any]] = []
    names = [c.name for c in CATEGORIES]
    names += sorted(k for k in {*expected, *got} if k not in names)
    for name in names:
        difference = _in_step_order(expected.get(name), got.get(name), result)
        if difference is not None:
            found.append((name, *difference))
    if not found:
        return None
    name, pointer, a, b = found[0]
    parts = pointer.split("/")
    step, inner = "the trace", pointer
    if len(parts) >= 3 and parts[1] == "steps":
        key = json_pointer.unescape(parts[2])
        step, inner = _step_words(key, result), "/" + "/".join(parts[3:])
    return GoldenDivergence(name, step, inner, a, b, tuple(f[0] for f in found[1:]))


def applies(result: ScenarioResult) -> bool:
    """Judged against a golden trace: a bridge's result on a transport, at the seed level,
    that ran to its checks."""
    return (result.subject == "bridge" and result.level == SEED
            and result.transport in ("stdio", "http") and bool(result.path)
            and result.status in (PASSED, "failed") and result.outcome is not None)


def judges(*, level: str, profile: object | None, server: str
           ) -> tuple[Callable[[list[ScenarioResult], Sequence[str]], None], ...]:
    """The judges a run passes its suite (``SuiteOptions.judges``): the golden traces' at the
    seed level, against the fake, without a profile or with one that only describes a seed copy
    (``Profile.plain_seed_copy``; any other profile says the bridge differs from the seed);
    none otherwise."""
    plain = profile is None or getattr(profile, "plain_seed_copy", False) is True
    return (judge,) if level == SEED and plain and server == "fake" else ()


def judge(results: Sequence[ScenarioResult], capabilities: Sequence[str] = CAPABILITIES) -> None:
    """Add the golden check to every result it applies to (a status it fails is updated).

    The traces are a whole seed copy's: a bridge that lacks a seed capability (declared or
    detected) registers and does less than the reference in every scenario, so its results are
    judged by their checks alone, as at core (fixtures/README.md, "Golden traces"). A harness
    capability (result_parts) or a local one (cli, helper_group_kill) only sets its own
    scenarios aside: the TypeScript copies lack both local ones and are judged whole."""
    wide = {c for c in CAPABILITIES if c not in (*HARNESS_CAPABILITIES, *LOCAL_CAPABILITIES)}
    if not wide <= set(capabilities):
        return
    stores: dict[Path, GoldenStore] = {}
    for result in results:
        if not applies(result):
            continue
        where = golden_root(result.path)
        if where is None:
            continue
        root, relative = where
        store = stores.setdefault(root, GoldenStore.open(root))
        check = golden_check(result, store.trace(relative, result.transport),
                             str(Path(GOLDEN_DIR) / relative))
        result.checks.append(check)
        if not check.passed:
            result.status = scenario_status(result.checks, result.level)
            if not result.reason:
                result.reason = f"{check.pointer}: {check.message}"


def golden_check(result: ScenarioResult, expected: Mapping[str, Any] | None,
                 where: str) -> CheckRecord:
    """The check record of one result against its golden trace (None: there is none)."""
    hint = UPDATE_HINT.format(id=result.scenario)

    def record(status: CheckStatus, message: str, expected: Any = None,
               got: Any = None) -> CheckRecord:
        return CheckRecord(scenario=result.scenario, transport=result.transport,
                           pointer=POINTER, status=status, message=message,
                           covers=result.covers, expected=expected, got=got, level=SEED)

    if expected is None:
        return record(FAIL, f"no golden trace for this scenario on {result.transport} in "
                            f"{where}: {hint}")
    divergence = first_divergence(expected, observed(result), result)
    if divergence is None:
        return record(PASS, f"matches the golden trace ({where})")
    return record(FAIL, f"{divergence.message()}; {hint}",
                  expected={"category": divergence.category, "step": divergence.step,
                            "field": divergence.field, "value": divergence.expected},
                  got=divergence.got)
