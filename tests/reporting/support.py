"""Shared helpers for the reporting tests: hosts, tiny scenarios of the test's own, the CLI."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.cli import main
from palace_conformance.scenarios.loader import scenarios_dir

HERE = Path(__file__).resolve().parent
SCRIPTED_HOST = HERE.parent / "runner" / "scripted_host.py"
MUTANT_HOST = HERE.parent / "runner" / "mutant_host.py"
LEAKY_HOST = HERE / "leaky_host.py"
#: answers every op with ok and registers nothing: a bridge-less host that is quick to run
GOOD = shlex.join([sys.executable, str(SCRIPTED_HOST), "good", "stdio,http"])
ERRORS_AS_EXCEPTION = shlex.join([sys.executable, str(MUTANT_HOST), "errors-as-exception"])
LEAKY = shlex.join([sys.executable, str(LEAKY_HOST)])


def shipped_file(sid: str) -> str:
    return str(scenarios_dir() / sid.split(".", 1)[0] / f"{sid}.json")


def write_scenario(directory: Path, sid: str, load_expect: dict[str, Any],
                   transports: tuple[str, ...] = ("stdio",)) -> Path:
    """A one-step scenario: ``load`` with the given expectation. Against :data:`GOOD` (which
    answers ``ok``) ``{"ok": True}`` passes and ``{"ok": False}`` fails."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{sid}.json"
    path.write_text(json.dumps({
        "schema_version": 1, "id": sid, "title": sid, "covers": ["LIFE-01"],
        "transports": list(transports), "steps": [{"op": "load", "expect": load_expect}]}))
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``palace-conformance ARGS`` in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]
