"""The expected-verdict baseline for the official suite (``baseline.yaml`` beside this module):
which scenarios may fail or warn, and why. Exact scenario names win over fnmatch patterns."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palace_conformance.errors import BaselineError as BaselineError
from palace_conformance.official.results import VERDICTS, ScenarioResult

DEFAULT_PATH = Path(__file__).resolve().parent / "baseline.yaml"
MODES = ("server", "client")


@dataclass(frozen=True)
class Expected:
    verdict: str
    reason: str


@dataclass(frozen=True)
class Baseline:
    entries: dict[str, dict[str, Expected]]

    def expected(self, mode: str, scenario: str) -> Expected | None:
        """The entry for ``scenario``: its exact key, else the first pattern that matches it."""
        table = self.entries.get(mode, {})
        if scenario in table:
            return table[scenario]
        for key, entry in table.items():
            if fnmatch.fnmatchcase(scenario, key):
                return entry
        return None

    def judge(self, mode: str, results: dict[str, ScenarioResult]) -> list[str]:
        """One line per scenario whose verdict is not the expected one (PASS when unlisted)."""
        problems: list[str] = []
        for name, result in sorted(results.items()):
            entry = self.expected(mode, name)
            wanted = entry.verdict if entry else "PASS"
            if result.verdict != wanted:
                why = "stale baseline entry" if entry and result.verdict == "PASS" else "unexpected"
                problems.append(f"{name}: {result.verdict}, expected {wanted} ({why})")
        return problems


def load_baseline(path: Path | None = None) -> Baseline:
    """Read a baseline YAML (``{server: {NAME: {verdict, reason}}, client: {...}}``)."""
    import yaml

    source = path or DEFAULT_PATH
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {source}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise BaselineError(f"baseline {source} is not YAML ({str(exc).splitlines()[0]}); "
                            "fix its syntax") from None
    if not isinstance(data, dict) or set(data) - set(MODES):
        raise BaselineError(f"baseline {source}: expected a mapping with only the keys "
                            f"{', '.join(MODES)}")
    return Baseline({mode: _entries(source, mode, data.get(mode) or {}) for mode in MODES})


def _entries(source: Path, mode: str, table: Any) -> dict[str, Expected]:
    if not isinstance(table, dict):
        raise BaselineError(f"baseline {source}: '{mode}' must map scenario names to entries")
    entries: dict[str, Expected] = {}
    for name, entry in table.items():
        where = f"baseline {source}: {mode}.{name}"
        if not isinstance(entry, dict) or set(entry) != {"verdict", "reason"}:
            raise BaselineError(f"{where} needs exactly 'verdict' and 'reason'")
        if entry["verdict"] not in VERDICTS:
            raise BaselineError(f"{where}: verdict must be one of {', '.join(VERDICTS)}")
        if not isinstance(entry["reason"], str) or not entry["reason"].strip():
            raise BaselineError(f"{where}: give the reason it is expected, as text")
        entries[str(name)] = Expected(entry["verdict"], entry["reason"])
    return entries
