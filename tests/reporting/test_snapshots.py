"""Golden traces: the reference bridge's normalised trace for a spread of scenarios (every area
with a fast case, both transports), stored as plain JSON under ``tests/snapshots/``.

A changed snapshot is a behaviour change of the reference bridge (or of the fake) and is
reviewed like code: ``pytest tests/reporting/test_snapshots.py --snapshot-update`` rewrites them.
The traces must be byte-stable across runs, workers and days, which is the normaliser's job
(``runner/reports/trace.py``); the checks in the fixtures stay the specification, a snapshot
only records.
"""

from __future__ import annotations

from typing import Any

import pytest

from palace_conformance.hosts import REFERENCE_HOST
from palace_conformance.runner.execution.execute import RunOptions, run_scenario
from palace_conformance.runner.reports.redact import scenario_secrets
from palace_conformance.runner.reports.trace import build_trace
from palace_conformance.scenarios.loader import load_scenario

from .support import shipped_file
from .trace_snapshot import TraceSnapshot

CASES = [
    ("life.handshake.initialize-first", "stdio"),
    ("life.handshake.initialize-first", "http"),
    ("tool.errors.rpc-errors-and-results-kept", "stdio"),
    ("tool.errors.rpc-errors-and-results-kept", "http"),
    ("stdio.respawn.after-crash", "stdio"),
    ("stdio.timeout.stall-kills-child", "stdio"),
    ("http.session.404-reinit-and-retry-once", "http"),
    ("http.auth.bearer-on-every-request", "http"),
    ("diary.command.topic-on-both-transports", "stdio"),
    ("wake.new-session.injects-with-agent-name", "http"),
    ("prov.shared-palace.stamps-writers", "http"),
    ("feed.wing.defaults", "stdio"),
    ("fake.errors.shapes-and-texts", "stdio"),
]


@pytest.fixture
def trace_snapshot(snapshot: Any) -> Any:
    return snapshot.use_extension(TraceSnapshot)


@pytest.mark.parametrize(("sid", "transport"), CASES, ids=[f"{s}--{t}" for s, t in CASES])
def test_reference_trace_matches_snapshot(sid: str, transport: str, trace_snapshot: Any) -> None:
    scenario = load_scenario(shipped_file(sid))
    result = run_scenario(scenario, transport, RunOptions(host_argv=REFERENCE_HOST))
    assert result.status == "passed", result.reason  # a golden of a failure would hide it
    trace = build_trace(result, scenario_secrets(scenario.raw), fixture=scenario.raw)
    assert trace == trace_snapshot


def test_every_golden_belongs_to_a_case() -> None:
    """syrupy cannot relate these file names to the test, so it never reports them unused:
    a golden left behind by a removed case is caught here instead."""
    from .trace_snapshot import SNAPSHOTS

    stored = sorted(p.stem for p in SNAPSHOTS.glob("*.json"))
    assert stored == sorted(f"{s}--{t}" for s, t in CASES)
