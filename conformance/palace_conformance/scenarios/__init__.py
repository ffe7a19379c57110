"""Scenario fixtures (the JSON under fixtures/scenarios): loading, validating and listing the
language-neutral files, plus the matcher and check semantics every runner shares.

Typical use by a runner::

    from palace_conformance.scenarios import load_catalogue
    catalogue = load_catalogue()          # the shipped scenarios
    for scenario in catalogue.scenarios:  # typed: see .model
        ...
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any

_EXPORTS = {
    "Verdict": "checks", "evaluate": "checks",
    "Catalogue": "loader", "Problem": "loader", "ScenarioError": "loader",
    "load_catalogue": "loader", "load_scenario": "loader",
    "matches": "matching", "why_not": "matching",
    "Scenario": "model", "Step": "model",
}


def __getattr__(name: str) -> Any:
    """Lazy exports: the loader imports jsonschema, which the fake's own commands never need."""
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Catalogue", "Problem", "Scenario", "ScenarioError", "Step", "Verdict", "evaluate",
    "load_catalogue", "load_scenario", "matches", "why_not",
]
