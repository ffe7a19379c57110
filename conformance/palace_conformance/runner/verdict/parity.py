"""Parity: a scenario that runs on stdio and HTTP must show the agent the same outcome on both.

The outcome of each run is normalised (:mod:`.normalise`) over the steps that run on every
transport; the first JSON pointer where the two differ (outside ``parity.ignore``) fails the
comparison, with both values, so the report says exactly where the transports part ways.
"""

from __future__ import annotations

import json
from typing import Any

from palace_conformance.contract import TRANSPORTS
from palace_conformance.runner.results import (
    CORE,
    FAIL,
    FAILED,
    NOT_APPLICABLE,
    NOT_TESTABLE,
    PARITY,
    PASS,
    PASSED,
    SEED,
    CheckRecord,
    ScenarioResult,
)
from palace_conformance.runner.verdict.normalise import first_difference
from palace_conformance.scenarios.model import Scenario


def applies(scenario: Scenario) -> bool:
    return scenario.parity.enabled and all(t in scenario.transports for t in TRANSPORTS)


def common_keys(scenario: Scenario) -> list[str]:
    """The steps that run on every transport (a step limited to one is not compared)."""
    return [step.key for step in scenario.steps if step.transport is None]


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def compare(scenario: Scenario, stdio: ScenarioResult, http: ScenarioResult,
            level: str = SEED) -> ScenarioResult:
    """The parity result of one scenario, from its two transport results.

    Parity is the seed's promise that its copies behave alike on both transports, so a core run
    does not judge it; and two failed runs are not compared (their agreement proves nothing)."""
    result = ScenarioResult(scenario=scenario.id, transport=PARITY, status=PASSED,
                            title=scenario.title, covers=scenario.covers, path=str(scenario.path),
                            level=level, subject=scenario.subject)
    runs = {"stdio": stdio, "http": http}
    inapplicable = [t for t, r in runs.items() if r.status == NOT_APPLICABLE]
    if inapplicable:
        result.status = NOT_APPLICABLE
        result.reason = f"Not applicable: not run on {', '.join(inapplicable)}"
        return result
    if level == CORE and scenario.subject != "fake":
        result.status = NOT_APPLICABLE
        result.reason = ("Not applicable: parity is a seed convention (judge it with "
                         "--level seed)")
        return result
    if all(r.status == FAILED for r in runs.values()):
        result.status = NOT_APPLICABLE
        result.reason = "Not compared: both transports failed, so their agreement proves nothing"
        return result
    untestable = [t for t, r in runs.items() if r.status == NOT_TESTABLE or r.outcome is None]
    if untestable:
        result.status = NOT_TESTABLE
        result.reason = (f"Not testable: the {' and '.join(untestable)} run could not be "
                         "set up, so there is nothing to compare")
        result.checks.append(CheckRecord(scenario.id, PARITY, "/parity", FAIL, result.reason,
                                         covers=scenario.covers))
        return result
    keys = set(common_keys(scenario))
    outcomes = {t: {"steps": {k: v for k, v in (r.outcome or {}).get("steps", {}).items()
                              if k in keys}} for t, r in runs.items()}
    result.outcome = outcomes
    difference = first_difference(outcomes["stdio"], outcomes["http"], scenario.parity.ignore)
    if difference is None:
        result.checks.append(CheckRecord(
            scenario.id, PARITY, "/parity", PASS,
            f"stdio and http outcomes agree over {len(keys)} step(s)", covers=scenario.covers))
        return result
    pointer, left, right = difference
    step = pointer.split("/")[2] if pointer.startswith("/steps/") else None
    message = (f"stdio and http differ at {pointer}: stdio {_shown(left)}, http {_shown(right)}"
               " (the agent should see the same on both transports; if this difference is "
               "the palace's and legitimate, the scenario's author declares it in "
               "parity.ignore)")
    result.status = "failed"
    result.reason = message
    result.checks.append(CheckRecord(scenario.id, PARITY, "/parity", FAIL, message, step=step,
                                     covers=scenario.covers, expected=left, got=right))
    return result

