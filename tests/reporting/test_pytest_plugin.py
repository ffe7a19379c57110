"""The pytest plugin, driven as a user would: ``pytest -p ... --palace-bridge=...`` in a child
process, in a directory of its own (so this project's own ini and tests stay out of it). Other
installed plugins are not auto-loaded there: they cost seconds of start-up and prove nothing."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from palace_conformance.contract import CAPABILITIES

from .support import GOOD, SCRIPTED_HOST, write_scenario

PLUGIN = "palace_conformance.runner.pytest_plugin"


def pytest_in(directory: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[
        str]:
    (directory / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", PLUGIN, "-p", "no:cacheprovider",
                           "--rootdir", str(directory), *args],
                          cwd=directory, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_reference_bridge_items_are_collected_and_run(tmp_path: Path) -> None:
    done = pytest_in(tmp_path, "--palace-bridge=reference", "--palace-select",
                     "life.handshake.*", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    for sid in ("life.handshake.initialize-first", "life.handshake.tools-list-pages"):
        for transport in ("stdio", "http", "parity"):
            assert f"{sid}[{transport}] PASSED" in done.stdout, done.stdout
    assert "6 passed" in done.stdout
    assert "palace-conformance: bridge reference, 2 scenario(s), transports stdio, http" \
        in done.stdout


def test_failures_known_failures_and_stale_entries(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenario(scenarios, "life.plug.fails", {"ok": False})
    write_scenario(scenarios, "life.plug.known", {"ok": False})
    write_scenario(scenarios, "life.plug.passes", {"ok": True})
    write_scenario(scenarios, "life.plug.fixed", {"ok": True})
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"schema_version": 1, "entries": [
        {"scenario": "life.plug.known", "transport": "stdio", "reason": "host ignores load"},
        {"scenario": "life.plug.fixed", "transport": "stdio", "reason": "was broken"},
        {"scenario": "life.plug.gone", "transport": "*", "reason": "renamed long ago"}]}))
    done = pytest_in(tmp_path, f"--palace-bridge={GOOD}", "--palace-level=seed",  # LIFE-01: seed
                     "--palace-scenarios", str(scenarios),
                     "--palace-transport", "stdio", "--palace-baseline", str(baseline), "-rA")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "2 failed, 1 passed, 1 xfailed" in out  # fails, and fixed (stale); passes; known
    # the failing item reports its check records, not a traceback
    assert "life.plug.fails [stdio] failed (covers LIFE-01): life.plug.fails" in out
    assert "/steps/0/expect/ok step 0: expected ok false, got true" in out
    assert "Traceback" not in out
    assert "XFAIL life.plug.known[stdio] - known failure (baseline): host ignores load" in out
    assert "FAILED life.plug.fixed[stdio]" in out
    assert f"life.plug.fixed[stdio]: passes now; remove it from the baseline {baseline}" in out
    assert "PASSED life.plug.passes[stdio]" in out
    # the entry for a scenario that does not exist fails the session
    assert "palace-conformance baseline" in out
    assert "life.plug.gone[*]: unknown scenario id" in out


def test_keyword_selection_and_collect_only_use_the_item_ids(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenario(scenarios, "life.plug.one", {"ok": True}, transports=("stdio", "http"))
    write_scenario(scenarios, "life.plug.two", {"ok": True}, transports=("stdio", "http"))
    done = pytest_in(tmp_path, f"--palace-bridge={GOOD}", "--palace-level=seed",  # LIFE-01: seed
                     "--palace-scenarios", str(scenarios),
                     "--collect-only", "-q", "-k", "one and not parity")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == ["life.plug.one[stdio]", "life.plug.one[http]"]


def test_without_palace_bridge_the_plugin_adds_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_own.py").write_text(
        "import sys\n\n"
        "def test_own():\n"
        "    loaded = [m for m in sys.modules if m.startswith('palace_conformance.runner.')]\n"
        "    assert loaded == ['palace_conformance.runner.pytest_plugin'], loaded\n")
    done = pytest_in(tmp_path, "-v", "--palace-select", "life.*")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_own.py::test_own PASSED" in done.stdout
    assert "1 passed" in done.stdout and "[stdio]" not in done.stdout


def test_a_profile_names_the_bridge_and_the_level(tmp_path: Path) -> None:
    profile = tmp_path / "ref.profile.json"
    profile.write_text(json.dumps({"schema_version": 1, "name": "ref at core",
                                   "entry": "reference", "claims": {"level": "core"}}))
    done = pytest_in(tmp_path, f"--palace-profile={profile}", "--palace-select",
                     "life.handshake.initialize-first", "--palace-select", "feed.wing.defaults",
                     "--palace-transport", "stdio", "-v", "-rs")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "life.handshake.initialize-first[stdio] PASSED" in done.stdout
    assert "feed.wing.defaults[stdio] SKIPPED" in done.stdout
    assert "judge them with --level seed" in done.stdout
    done = pytest_in(tmp_path, "--palace-profile", str(tmp_path / "missing.json"))
    assert done.returncode == 4 and "--palace-profile: cannot read profile" in done.stderr


def test_usage_problems_stop_before_collection(tmp_path: Path) -> None:
    done = pytest_in(tmp_path, "--palace-bridge=/nonexistent/host")
    assert done.returncode == 4
    assert "--palace-bridge: bridge command '/nonexistent/host' not found" in done.stderr
    assert "Traceback" not in done.stderr
    done = pytest_in(tmp_path, "--palace-bridge=reference", "--palace-select", "nomatch.*")
    assert done.returncode == 4 and "--palace-select nomatch.*: no scenario id matches" \
        in done.stderr
    bad = tmp_path / "b.json"
    bad.write_text("{}")
    done = pytest_in(tmp_path, "--palace-bridge=reference", "--palace-select", "life.*",
                     "--palace-baseline", str(bad))
    assert done.returncode == 4
    assert f"--palace-baseline {bad}: /: missing required field" in done.stderr


def test_wildcard_entries_are_judged_across_xdist_workers(tmp_path: Path) -> None:
    """A '*' entry can only be judged with every result of its scenario in hand; under xdist
    those come from several workers, so the controller judges it at the end."""
    scenarios = tmp_path / "scenarios"
    write_scenario(scenarios, "life.plug.both", {"ok": True}, transports=("stdio", "http"))
    write_scenario(scenarios, "life.plug.half", {"ok": True})
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"schema_version": 1, "entries": [
        {"scenario": "life.plug.both", "transport": "*", "reason": "was flaky"}]}))
    done = pytest_in(tmp_path, f"--palace-bridge={GOOD}", "--palace-level=seed",  # LIFE-01: seed
                     "--palace-scenarios", str(scenarios),
                     "--palace-baseline", str(baseline), "-p", "xdist", "-n", "2",
                     "--dist", "loadgroup")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "4 passed" in out  # both[stdio], both[http], both[parity], half[stdio]
    assert "palace-conformance baseline" in out
    assert "life.plug.both[*]: passes now; remove it from the baseline" in out


def test_a_placeholder_capability_list_is_replaced_by_what_was_observed(tmp_path: Path) -> None:
    """A host that marks its list as a placeholder is observed once; a scenario needing what
    was not seen is skipped with that reason (the scripted host reaches no fake: the transports
    are kept, no feature)."""
    placeholder = shlex.join([sys.executable, str(SCRIPTED_HOST), "good",
                              "default:" + ",".join(CAPABILITIES)])
    done = pytest_in(tmp_path, f"--palace-bridge={placeholder}", "--palace-level=seed",
                     "--palace-select", "wake.fresh-session.inject-once",
                     "--palace-transport", "stdio", "-rs")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "1 skipped" in out
    assert "wakeup not detected by observation, and no profile claims it" in out
    assert "palace-conformance capabilities" in out
    assert "the bridge reached the fake on no transport, so stdio kept" in out


def collected(done: subprocess.CompletedProcess[str]) -> set[str]:
    """The node ids ``--collect-only -q`` listed."""
    assert done.returncode == 0, done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if line and " " not in line}


def test_paths_narrow_the_scenarios_as_test_paths_do(tmp_path: Path) -> None:
    """Each scenario file is a collector: a directory, one file or one of its items named on
    the command line chooses the scenarios; with no path, the whole catalogue runs beside the
    project's own tests."""
    scenarios = tmp_path / "scenarios"
    one = write_scenario(scenarios / "a", "life.plug.one", {"ok": True},
                         transports=("stdio", "http"))
    write_scenario(scenarios / "a", "life.plug.two", {"ok": True})
    three = write_scenario(scenarios / "b", "life.plug.three", {"ok": True})
    (tmp_path / "test_own.py").write_text("def test_own():\n    pass\n")
    base = (f"--palace-bridge={GOOD}", "--palace-level=seed", "--palace-scenarios", "scenarios",
            "--collect-only", "-q")
    every = {"life.plug.one[stdio]", "life.plug.one[http]", "life.plug.one[parity]",
             "life.plug.two[stdio]", "life.plug.three[stdio]"}
    assert collected(pytest_in(tmp_path, *base)) == every | {"test_own.py::test_own"}
    assert collected(pytest_in(tmp_path, *base, "test_own.py")) == every | {
        "test_own.py::test_own"}  # no scenario named: the catalogue still runs
    assert collected(pytest_in(tmp_path, *base, "scenarios/a")) == {
        "life.plug.one[stdio]", "life.plug.one[http]", "life.plug.one[parity]",
        "life.plug.two[stdio]"}
    assert collected(pytest_in(tmp_path, *base, str(three))) == {"life.plug.three[stdio]"}
    assert collected(pytest_in(tmp_path, *base, f"{one}::life.plug.one[http]")) == {
        "life.plug.one[http]"}
    assert collected(pytest_in(tmp_path, *base, "scenarios/b", "test_own.py")) == {
        "life.plug.three[stdio]", "test_own.py::test_own"}
    assert collected(pytest_in(tmp_path, *base, "scenarios", "--palace-select",
                               "life.plug.t*")) == {"life.plug.two[stdio]",
                                                    "life.plug.three[stdio]"}


def test_a_narrowed_run_runs_only_the_scenarios_named(tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    write_scenario(scenarios / "a", "life.plug.fails", {"ok": False})
    write_scenario(scenarios / "b", "life.plug.passes", {"ok": True})
    done = pytest_in(tmp_path, f"--palace-bridge={GOOD}", "--palace-level=seed",
                     "--palace-scenarios", "scenarios", "scenarios/b", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "life.plug.passes[stdio] PASSED" in done.stdout
    assert "1 passed" in done.stdout and "life.plug.fails" not in done.stdout
    outside = tmp_path / "other.json"
    outside.write_text("{}")
    done = pytest_in(tmp_path, f"--palace-bridge={GOOD}", "--palace-scenarios", "scenarios",
                     str(outside))
    assert done.returncode == 4
    assert f"{outside}: not a scenario of the catalogue (give its directory with " \
           "--palace-scenarios)" in done.stderr
