"""What the tool hands cosmic-ray: the test command, the session config, the seeded sample."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path
from types import SimpleNamespace

from mutation.sessions import (
    ModuleSession,
    _keys,
    _relative,
    choose_sample,
    config_text,
    environment,
    scenario_command,
)


def test_the_command_runs_exactly_the_selection_on_both_transports() -> None:
    argv = scenario_command(["life.a", "stdio.b"], 2, "/bin/palace-conformance")
    assert argv[:2] == ["/bin/palace-conformance", "run"]
    assert argv[argv.index("--transport") + 1] == "both"
    assert argv[argv.index("--jobs") + 1] == "2"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--select"] == ["life.a", "stdio.b"]


def test_the_config_is_toml_cosmic_ray_reads_back(tmp_path: Path) -> None:
    command = ["/a b/palace-conformance", "run", "--select", 'x"y']
    parsed = tomllib.loads(config_text(tmp_path / "m.py", command, 42.5))["cosmic-ray"]
    assert shlex.split(parsed["test-command"]) == command
    assert parsed["timeout"] == 42.5
    assert parsed["module-path"] == str(tmp_path / "m.py")
    assert parsed["distributor"]["name"] == "local"


def test_the_sample_is_fixed_by_its_seed() -> None:
    keys = [f"m.py:{n}:0:Op" for n in range(50)]
    first = choose_sample(keys, 5, 12)
    assert len(first) == 5 and first <= set(keys)
    assert choose_sample(reversed(keys), 5, 12) == first
    assert choose_sample(keys, 5, 13) != first
    assert choose_sample(keys[:3], 5, 12) == set(keys[:3])


def test_the_scratch_copy_comes_first_on_pythonpath(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = environment(tmp_path)
    assert env["PYTHONPATH"].split(":") == [str(tmp_path / "src"), "/elsewhere"]


def test_sessions_live_apart_per_module(tmp_path: Path) -> None:
    session = ModuleSession("features/feeding.py", tmp_path)
    assert session.db == tmp_path / "sessions" / "features.feeding.sqlite"
    assert session.source == tmp_path / "src" / "palace_bridge" / "features" / "feeding.py"


def test_diff_headers_name_the_checkout_not_the_scratch_copy() -> None:
    diff = "--- mutation diff ---\n--- a/tmp/w/src/palace_bridge/sse.py\n+++ b/tmp/w/src/" \
           "palace_bridge/sse.py\n@@ -1 +1 @@\n-x\n+y"
    shown = _relative(diff).splitlines()
    assert shown[1] == "--- reference/palace_bridge/sse.py"
    assert shown[2] == "+++ reference/palace_bridge/sse.py"
    assert shown[4:] == ["-x", "+y"]


def item(job: str, operator: str, occurrence: int, start: tuple[int, int]) -> SimpleNamespace:
    spec = SimpleNamespace(operator_name=operator, occurrence=occurrence, start_pos=start)
    return SimpleNamespace(job_id=job, mutations=(spec,))


def test_two_mutants_of_one_operator_at_one_place_get_distinct_keys() -> None:
    items = [item("b", "core/NumberReplacer", 1, (8, 17)),
             item("a", "core/NumberReplacer", 0, (8, 17)),
             item("c", "core/AddNot", 0, (8, 17))]
    assert _keys("backoff.py", items) == {"a": "backoff.py:8:17:NumberReplacer",
                                          "b": "backoff.py:8:17:NumberReplacer#2",
                                          "c": "backoff.py:8:17:AddNot"}

