"""Issue 25, item 6: a hypothesis fuzz of each untrusted loader (profile, baseline, shard result,
fixture, bundle). Whatever the file holds (arbitrary bytes, arbitrary JSON, or a valid file with
one part replaced by arbitrary JSON), the loader returns or raises its own error with one line:
never another exception, never a line past 1,000 characters."""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palace_conformance.errors import RunUsageError
from palace_conformance.runner.compare.sources import load_result_file
from palace_conformance.runner.profile import ProfileError, load_profile
from palace_conformance.runner.reports.replay import ReplayError, load_bundle
from palace_conformance.runner.results import NOT_TESTABLE, RunResult, ScenarioResult
from palace_conformance.runner.verdict.baseline import BaselineError, load_baseline
from palace_conformance.scenarios.loader import ScenarioError, load_scenario, scenarios_dir

SID = "feed.lock.refused-then-next-trigger-remines"
FEED = json.loads((scenarios_dir() / "feed" / f"{SID}.json").read_text())
SEEDS: dict[str, Any] = {
    "profile": {"schema_version": 1, "name": "fuzz", "entry": "reference",
                "knobs": {"MEMPALACE_MCP_TIMEOUT_MS": {"env": "PI_TIMEOUT_MS", "unit": "s"}},
                "files": [{"path": "${HOME}/.pi/x.json", "json": {"url": "${FAKE_URL}"}}],
                "tools": {"map": {"palace_search": "mempalace_search"}}},
    "baseline": {"schema_version": 1, "bridge": "fuzz",
                 "entries": [{"scenario": "life.a.one", "transport": "stdio", "reason": "r"}]},
    "result": RunResult(results=[ScenarioResult(scenario="life.a.one", transport="stdio",
                                                status=NOT_TESTABLE, reason="x",
                                                covers=("LIFE-01",))]).to_json(),
    "fixture": FEED,
    "bundle": FEED,
}
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                  max_size=4),
    max_leaves=20)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*at, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*at, index))
    return found


def _replace(value: Any, at: tuple[Any, ...], new: Any) -> Any:
    if not at:
        return new
    out = copy.deepcopy(value)
    holder = out
    for key in at[:-1]:
        holder = holder[key]
    holder[at[-1]] = new
    return out


def _load(kind: str, data: bytes, base: Path) -> None:
    """Give ``data`` to the loader of ``kind``; its own error is fine, one line."""
    loaders: dict[str, tuple[Callable[[Path], object], tuple[type[Exception], ...], str]] = {
        "profile": (load_profile, (ProfileError,), "p.json"),
        "baseline": (load_baseline, (BaselineError,), "b.json"),
        "result": (lambda p: load_result_file(str(p)), (RunUsageError,), "r.json"),
        "fixture": (load_scenario, (ScenarioError,), f"{SID}.json"),
        "bundle": (load_bundle, (ReplayError, ScenarioError), "bundle"),
    }
    load, errors, name = loaders[kind]
    path = base / name
    if kind == "bundle":
        path.mkdir()
        (path / "bundle.json").write_text(json.dumps({"transports": ["stdio"],
                                                      "bridge": "reference"}))
        (path / "scenario.json").write_bytes(data)
    else:
        path.write_bytes(data)
    try:
        load(path)
    except errors as exc:
        message = str(exc)
        assert "\n" not in message and len(message) <= 1000, message[:300]


def _check(kind: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as base:
        _load(kind, data, Path(base))


KINDS = st.sampled_from(sorted(SEEDS))


@SETTINGS
@given(kind=KINDS, data=st.binary(max_size=200))
def test_arbitrary_bytes(kind: str, data: bytes) -> None:
    _check(kind, data)


@SETTINGS
@given(kind=KINDS, value=json_values)
def test_arbitrary_json(kind: str, value: Any) -> None:
    _check(kind, json.dumps(value).encode())


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kind=KINDS, pick=st.integers(min_value=0), value=json_values)
def test_a_valid_file_with_one_part_replaced(kind: str, pick: int, value: Any) -> None:
    seed = SEEDS[kind]
    places = _paths(seed)
    _check(kind, json.dumps(_replace(seed, places[pick % len(places)], value)).encode())
