"""Expected-failure baselines: known failures keep a run green, fixed or expired ones turn it red.

A baseline is anything with :meth:`Baseline.mark` (is this failing result a known one?) and
:meth:`Baseline.stale` (entries that no longer hold, which turn the run red so the baseline is
kept honest, as the MCP conformance suite does). :class:`ExpectedFailures` is the minimal
in-memory kind; :class:`BaselineFile` is the governed file format (``docs/baselines.md``,
``fixtures/schema/baseline.schema.json``): each entry names a scenario and transport (or ``*``)
and carries a reason, an optional issue and an optional expiry date. An entry fails the run when
its scenario passes now (stale), when no such scenario exists (stale), or when it is past its
``expires`` date (expired); an expired entry no longer excuses its failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Protocol

from palace_conformance.contract import TRANSPORTS
from palace_conformance.errors import BaselineError as BaselineError
from palace_conformance.runner.results import (
    FAILURE_STATUSES,
    PARITY,
    BaselineMark,
    RunResult,
    ScenarioResult,
)

BASELINE_FORMAT = 1
BASELINE_SCHEMA = "baseline.schema.json"
ANY_TRANSPORT = "*"
ENTRY_TRANSPORTS = (*TRANSPORTS, PARITY, ANY_TRANSPORT)
#: how :meth:`BaselineFile.stale` words its lines, so reports can tell the kinds apart
EXPIRED_WORDS = ": expired on "
UNKNOWN_WORDS = ": unknown scenario id"


class Baseline(Protocol):
    def mark(self, result: ScenarioResult) -> BaselineMark | None:
        """A mark when ``result`` is a failure this baseline expects, else None."""
        ...

    def stale(self, results: Sequence[ScenarioResult]) -> list[str]:
        """Entries whose scenario ran and no longer fails (one line each)."""
        ...


def entry_key(result: ScenarioResult) -> str:
    """How a baseline names a result: ``<scenario>[<transport>]``."""
    return f"{result.scenario}[{result.transport}]"


class ExpectedFailures:
    """A set of ``<scenario>[<transport>]`` keys (or bare scenario ids, for every transport)."""

    def __init__(self, entries: Iterable[str], reason: str = "", source: str = "") -> None:
        self.entries = set(entries)
        self.reason = reason
        self.source = source

    def _listed(self, result: ScenarioResult) -> str | None:
        for key in (entry_key(result), result.scenario):
            if key in self.entries:
                return key
        return None

    def mark(self, result: ScenarioResult) -> BaselineMark | None:
        if result.status in FAILURE_STATUSES and self._listed(result) is not None:
            return BaselineMark("fail", self.reason, self.source)
        return None

    def stale(self, results: Sequence[ScenarioResult]) -> list[str]:
        ran: dict[str, list[ScenarioResult]] = {}
        for result in results:
            key = self._listed(result)
            if key is not None:
                ran.setdefault(key, []).append(result)
        return [f"{key}: passes now; remove it from the baseline"
                for key, hits in sorted(ran.items())
                if all(r.status not in FAILURE_STATUSES for r in hits)]


def apply_baseline(run: RunResult, baseline: Baseline | None) -> RunResult:
    """Mark expected failures and record stale entries; the run's exit code follows."""
    if baseline is None:
        return run
    for result in run.results:
        result.baseline = baseline.mark(result)
    run.stale_baseline = baseline.stale(run.results)
    return run




def line_kind(line: str) -> str:
    """``expired``, ``unknown`` or ``stale``: what a :attr:`RunResult.stale_baseline` line says."""
    if EXPIRED_WORDS in line:
        return "expired"
    if UNKNOWN_WORDS in line:
        return "unknown"
    return "stale"


@dataclass(frozen=True)
class Entry:
    """One known failure: ``scenario`` on ``transport`` (``*``: on every result of it)."""

    scenario: str
    transport: str
    reason: str
    issue: str | None = None
    expires: date | None = None

    @property
    def key(self) -> str:
        return f"{self.scenario}[{self.transport}]"

    def applies(self, result: ScenarioResult) -> bool:
        return result.scenario == self.scenario and self.transport in (ANY_TRANSPORT,
                                                                       result.transport)

    def expired(self, today: date) -> bool:
        return self.expires is not None and today > self.expires

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"scenario": self.scenario, "transport": self.transport,
                                "reason": self.reason}
        if self.issue:
            data["issue"] = self.issue
        if self.expires is not None:
            data["expires"] = self.expires.isoformat()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        expires = data.get("expires")
        return cls(scenario=data["scenario"], transport=data["transport"],
                   reason=data["reason"], issue=data.get("issue") or None,
                   expires=date.fromisoformat(expires) if expires else None)


def shipped_scenario_ids() -> set[str]:
    """Ids of the shipped scenarios, from file names (ids equal file names): no validation."""
    from palace_conformance.scenarios.loader import shipped_roots

    try:
        return {path.stem for root in shipped_roots(slow=True) for path in root.rglob("*.json")}
    except OSError:
        return set()


class BaselineFile:
    """A baseline read from (or about to be written to) a file; implements :class:`Baseline`.

    ``today`` decides expiry (injectable for tests); ``known`` maps scenario ids to the transports
    they run on, for the "unknown scenario id" rule (default: the shipped scenarios, plus every
    scenario a run reports).
    """

    def __init__(self, entries: Iterable[Entry], *, bridge: str | None = None,
                 source: str = "", today: date | None = None,
                 known: Mapping[str, Sequence[str]] | None = None) -> None:
        self.entries = list(entries)
        self.bridge = bridge
        self.source = source
        self.today = today or date.today()
        self.known: dict[str, tuple[str, ...] | None] = (
            {k: tuple(v) for k, v in known.items()} if known is not None else {})
        self._shipped = known is None

    def add_known(self, transports: Mapping[str, Sequence[str]]) -> None:
        """Scenarios a run loaded (``id -> transports``): entries naming them are not unknown."""
        self.known.update({k: tuple(v) for k, v in transports.items()})

    def entry_for(self, result: ScenarioResult) -> Entry | None:
        """The entry that speaks for ``result``: an exact transport wins over ``*``."""
        exact = wildcard = None
        for entry in self.entries:
            if entry.scenario != result.scenario:
                continue
            if entry.transport == result.transport:
                exact = entry
            elif entry.transport == ANY_TRANSPORT:
                wildcard = entry
        return exact or wildcard

    def mark(self, result: ScenarioResult) -> BaselineMark | None:
        if result.status not in FAILURE_STATUSES:
            return None
        entry = self.entry_for(result)
        if entry is None or entry.expired(self.today):
            return None
        reason = entry.reason + (f" ({entry.issue})" if entry.issue else "")
        return BaselineMark("fail", reason, self.source)

    def _known_transports(self, results: Sequence[ScenarioResult]) -> dict[str, tuple[str, ...]
                                                                           | None]:
        known: dict[str, tuple[str, ...] | None] = {}
        if self._shipped:
            known.update(dict.fromkeys(shipped_scenario_ids()))
        known.update(self.known)
        for result in results:
            known.setdefault(result.scenario, None)
        return known

    def stale(self, results: Sequence[ScenarioResult]) -> list[str]:
        known = self._known_transports(results)
        lines = []
        for entry in self.entries:
            if entry.scenario not in known:
                lines.append(f"{entry.key}{UNKNOWN_WORDS} (no such scenario; remove the entry "
                             "or fix the id)")
                continue
            transports = known[entry.scenario]
            if (transports is not None and entry.transport not in (ANY_TRANSPORT, PARITY)
                    and entry.transport not in transports):
                lines.append(f"{entry.key}: stale: the scenario never runs on "
                             f"{entry.transport}; remove the entry")
                continue
            hits = [r for r in results if entry.applies(r) and self.entry_for(r) is entry]
            if not hits:
                continue  # not run this time (--select, --transport): nothing to judge
            failing = any(r.status in FAILURE_STATUSES for r in hits)
            if entry.expired(self.today) and failing:
                assert entry.expires is not None
                lines.append(f"{entry.key}{EXPIRED_WORDS}{entry.expires.isoformat()}; the "
                             "failure counts again (fix it, or renew 'expires' with a reason)")
            elif not failing:
                lines.append(f"{entry.key}: passes now; remove it from the baseline")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": BASELINE_FORMAT, "bridge": self.bridge,
                "entries": [e.to_json() for e in self.entries]}


def parse_baseline(data: Any, where: str, *, today: date | None = None,
                   known: Mapping[str, Sequence[str]] | None = None) -> BaselineFile:
    """A baseline from JSON data; :class:`BaselineError` (``where: problem (fix)``) if malformed."""
    from palace_conformance.scenarios.schema import schema_problems

    if isinstance(data, dict) and isinstance(data.get("schema_version"), int) \
            and data["schema_version"] > BASELINE_FORMAT:
        raise BaselineError(f"{where}: uses schema_version {data['schema_version']}; this "
                            f"palace-conformance understands {BASELINE_FORMAT}: upgrade")
    problems = schema_problems(data, BASELINE_SCHEMA)
    if problems:
        first = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BaselineError(f"{where}: {first.pointer}: {first.message} ({first.fix}){more}")
    entries = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(data["entries"]):
        try:
            entry = Entry.from_json(raw)
        except ValueError:
            raise BaselineError(f"{where}: /entries/{index}/expires: {raw['expires']!r} is not "
                                "a calendar date (write YYYY-MM-DD)") from None
        if entry.key in seen:
            raise BaselineError(f"{where}: /entries/{index}: {entry.key} is already listed at "
                                f"/entries/{seen[entry.key]} (keep one entry)")
        seen[entry.key] = index
        entries.append(entry)
    return BaselineFile(entries, bridge=data.get("bridge"), source=where, today=today,
                        known=known)


BASELINE_MAX_BYTES = 16 * 1024 * 1024  # thousands of entries fit in a few hundred KiB


def load_baseline(path: str | Path, *, flag: str = "--baseline", today: date | None = None,
                  known: Mapping[str, Sequence[str]] | None = None) -> BaselineFile:
    """Read a baseline file; :class:`BaselineError` is one line starting ``FLAG PATH:``."""
    from palace_conformance import untrusted_file as untrusted

    where, data = untrusted.named_json(
        path, flag=flag, what="baseline", max_bytes=BASELINE_MAX_BYTES, error=BaselineError,
        unreadable="{problem} (write one with 'palace-conformance baseline update --from "
        "REPORT.json --out FILE')",
        unparsable="{bare}; see docs/baselines.md")
    baseline = parse_baseline(data, where, today=today, known=known)
    baseline.source = str(path)
    return baseline


def write_baseline(baseline: BaselineFile, path: str | Path) -> None:
    """Write the file: entries sorted by scenario and transport, so diffs stay small."""
    entries = sorted(baseline.entries, key=lambda e: (e.scenario, e.transport))
    data = {"$schema": "https://palace-conformance.invalid/schema/baseline.schema.json",
            **BaselineFile(entries, bridge=baseline.bridge).to_json()}
    Path(path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")


@dataclass
class Update:
    """What ``baseline update`` did: entries kept (still failing, or not in the report), added
    (new failures) and dropped (their results pass now)."""

    baseline: BaselineFile
    kept: list[Entry]
    added: list[Entry]
    dropped: list[Entry]


def update_baseline(run: RunResult, old: BaselineFile | None, *, reason: str,
                    issue: str | None = None, expires: date | None = None) -> Update:
    """A baseline listing the run's current failures. Entries of ``old`` that still cover a
    failure keep their reason, issue and expiry; entries for scenarios the report does not
    contain are kept as they are (a partial report cannot prove them stale)."""
    failing = [r for r in run.results if r.status in FAILURE_STATUSES]
    reported = {r.scenario for r in run.results}
    kept: list[Entry] = []
    dropped: list[Entry] = []
    covered: set[tuple[str, str]] = set()
    for entry in old.entries if old is not None else ():
        assert old is not None
        hits = [r for r in failing if entry.applies(r) and old.entry_for(r) is entry]
        if hits or entry.scenario not in reported:
            kept.append(entry)
            covered.update((r.scenario, r.transport) for r in hits)
        else:
            dropped.append(entry)
    added = [Entry(r.scenario, r.transport, reason, issue, expires) for r in failing
             if (r.scenario, r.transport) not in covered]
    bridge = run.host.bridge or (old.bridge if old is not None else None) \
        or " ".join(run.host.argv) or None
    return Update(BaselineFile([*kept, *added], bridge=bridge), kept, added, dropped)
