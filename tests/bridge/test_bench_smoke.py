"""The bridge benchmark still runs end to end (tiny sizes), so its figures stay reproducible."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_bridge.py"


@pytest.mark.sdk
def test_bench_bridge_runs_and_reports_a_ratio(tmp_path, capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_bridge", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv("PATH", __import__("os").environ["PATH"])  # the SDK run edits PATH
    out = tmp_path / "bench.json"
    assert bench.main(["--calls", "5", "--rounds", "2", "--warmup", "1", "--transport",
                       "stdio", "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results[0]["bridge"]["calls"] == 10 and results[0]["sdk"]["calls"] == 10
    assert results[0]["ratio_median"] > 0
    assert "ratio bridge/SDK" in capsys.readouterr().out
