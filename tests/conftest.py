"""Suite-wide: nothing a test runs writes into the user's own cache."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from palace_conformance.runner.last_failed import ENV_DIR


@pytest.fixture(scope="session", autouse=True)
def _last_failed_records_in_a_temp_dir(tmp_path_factory: pytest.TempPathFactory
                                       ) -> Iterator[None]:
    """``run`` keeps a ``--last-failed`` record per bridge; the suite's runs keep theirs here
    (subprocesses inherit it), never in ``~/.cache``."""
    previous = os.environ.get(ENV_DIR)
    os.environ[ENV_DIR] = str(tmp_path_factory.mktemp("last-failed"))
    yield
    if previous is None:
        os.environ.pop(ENV_DIR, None)
    else:
        os.environ[ENV_DIR] = previous


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how many documented commands tests/docs ran and skipped, and the hardening tests'
    tallies (frames tried, crashes, hangs; load figures): numbers the issues ask to see, shown
    whenever those tests ran; under xdist a report carries its tally to the controller."""
    stats = terminalreporter.stats
    for report in stats.get("passed", []) + stats.get("failed", []):
        for name, tally in getattr(report, "user_properties", []):
            if name == "documented_commands" and report.when == "call":
                terminalreporter.write_line(
                    f"documented commands: {tally['found']} found ({tally['kit']} of the kit's "
                    f"programs), {tally['run']} run ({tally['kit_run']} of the kit's; "
                    f"{tally['rewritten']} narrowed or rewritten), {tally['skipped']} skipped "
                    "(tests/docs/doc_commands.py says why)")
            elif name == "fuzz_tally" and report.when == "call":
                terminalreporter.write_line(f"fuzz tally: {json.dumps(tally, sort_keys=True)}")
