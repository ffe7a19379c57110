"""Shared helpers for the runner tests: hosts to drive, scenarios to run, options."""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

from palace_conformance.hosts import REFERENCE_HOST
from palace_conformance.runner.execution.execute import RunOptions
from palace_conformance.scenarios.loader import load_scenario, scenarios_dir
from palace_conformance.scenarios.model import Scenario

HERE = Path(__file__).resolve().parent
SCRIPTED = (sys.executable, str(HERE / "scripted_host.py"))
MUTANT = (sys.executable, str(HERE / "mutant_host.py"))


def scripted(mode: str, caps: str | None = None) -> tuple[str, ...]:
    return (*SCRIPTED, mode, *([caps] if caps is not None else []))


def mutant(mutation: str) -> tuple[str, ...]:
    return (*MUTANT, mutation)


@cache
def shipped(sid: str) -> Scenario:
    """One shipped scenario, loaded (and validated) on its own: fast."""
    return load_scenario(scenarios_dir() / sid.split(".", 1)[0] / f"{sid}.json")


def options(host: tuple[str, ...] = REFERENCE_HOST, **kwargs: Any) -> RunOptions:
    return RunOptions(host_argv=host, **kwargs)


def write_scenario(directory: Path, data: dict[str, Any]) -> Scenario:
    """A scenario file of the test's own (validated like any other)."""
    body = {"$schema": "x", "schema_version": 1, "title": data["id"], "covers": ["LIFE-01"],
            **data}
    path = directory / f"{data['id']}.json"
    path.write_text(json.dumps(body))
    return load_scenario(path)


def failing(result: Any) -> dict[str, str]:
    """pointer -> message of every failed check."""
    return {c.pointer: c.message for c in result.checks if c.status == "fail"}
