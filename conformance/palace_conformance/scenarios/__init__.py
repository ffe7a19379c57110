"""Scenario fixtures (the JSON under fixtures/scenarios): loading, validating and listing the
language-neutral files, plus the matcher and check semantics every runner shares.

Typical use by a runner::

    from palace_conformance.scenarios import load_catalogue
    catalogue = load_catalogue()          # the shipped scenarios
    for scenario in catalogue.scenarios:  # typed: see .model
        ...
"""

from .checks import Verdict, evaluate
from .loader import Catalogue, Problem, ScenarioError, load_catalogue, load_scenario
from .matching import matches, why_not
from .model import Scenario, Step

__all__ = [
    "Catalogue", "Problem", "Scenario", "ScenarioError", "Step", "Verdict", "evaluate",
    "load_catalogue", "load_scenario", "matches", "why_not",
]
