"""Every way a bridge starts a palace reaches the fake, and a run that never reached it is one
*not testable* line quoting the bridge's own diagnostics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.runner.execution.execute import run_scenario
from palace_conformance.runner.execution.world import World
from palace_conformance.runner.results import StepRecord
from palace_conformance.runner.verdict import reach
from palace_conformance.scenarios.model import Scenario

from .support import HERE, options, scripted, shipped, write_scenario

LAUNCHER = HERE / "launcher_bridge.py"
WAYS = ("python-m", "shebang", "light", "probe")
REACHES = "life.transport.default-stdio-child"  # calls a tool: a run must reach the palace
NOT_ON_PATH = "stdio.start.not-on-path"


def launch(world: World, *ways: str) -> dict[str, dict[str, Any]]:
    """Run the launcher bridge with the world's bridge environment; its report per way."""
    done = subprocess.run([sys.executable, str(LAUNCHER), *ways], env=world.env, cwd=world.root,
                          capture_output=True, text=True, timeout=120, check=True)
    return {line["way"]: line for line in map(json.loads, done.stdout.splitlines())}


def test_every_way_of_starting_the_palace_reaches_the_fake(tmp_path: Path) -> None:
    world = World(shipped(REACHES), "stdio", work_root=tmp_path).open()
    try:
        report = launch(world, *WAYS)
        records, _ = world.read_journal()
        shebang = (world.bin / "mempalace-mcp").read_text().splitlines()[0]
    finally:
        world.close()
    assert shebang == f"#!{world.bin}/.palace/bin/python"  # a Python that has mempalace
    assert all(report[way]["ok"] for way in WAYS), report
    assert report["probe"]["version"] == "3.11.0"
    for way in ("python-m", "shebang"):
        assert report[way]["server_info"] == {"name": "mempalace", "version": "3.11.0"}
        assert json.loads(report[way]["tool_text"])["total_drawers"] == 0
    assert report["light"]["server_info"] == {"name": "mempalace-light", "version": "3.11.0"}
    assert json.loads(report["light"]["tool_text"])["fake_unmodelled"] is True
    starts = [r for r in records if r["kind"] == "process_start"]
    assert len(starts) == 3 and {r["transport"] for r in starts} == {"stdio"}
    python_m, shebang, light = (r["argv"] for r in starts)
    # python -m shows the package's __main__ as argv[0], as the real server's would
    for argv in (python_m, shebang):
        assert argv[0].endswith("/mempalace/mcp_server/__main__.py") and argv[1:] == []
        assert argv[0].startswith(str(world.root))  # the run's own copy of the fake package
    assert light == [str(world.bin / "mempalace-light-mcp")]
    calls = [r["tool"] for r in records if r["kind"] == "recv" and r["method"] == "tools/call"]
    assert calls == ["mempalace_status", "mempalace_status", "palace_query"]


def test_not_on_path_removes_every_way_and_the_world_installs_nothing(tmp_path: Path) -> None:
    world = World(shipped(NOT_ON_PATH), "stdio", work_root=tmp_path).open()
    try:
        report = launch(world, *WAYS)
        records, _ = world.read_journal()
        installed = sorted(p.name for p in world.bin.iterdir()) if world.bin.exists() else []
        env = dict(world.env)
    finally:
        world.close()
    assert not any(report[way]["ok"] for way in WAYS), report
    assert "No module named 'mempalace'" in report["probe"]["error"]
    assert "mempalace-mcp is not on PATH" in report["shebang"]["error"]
    assert records == [] and installed == []
    assert str(world.bin) not in env["PATH"].split(os.pathsep)
    assert not any(entry.startswith(str(tmp_path))
                   for entry in env.get("PYTHONPATH", "").split(os.pathsep))


def test_an_installed_world_puts_the_fake_package_first_on_pythonpath(tmp_path: Path) -> None:
    world = World(shipped(REACHES), "stdio", work_root=tmp_path).open()
    try:
        first = world.env["PYTHONPATH"].split(os.pathsep)[0]
        assert first.startswith(str(world.bin)) and (Path(first) / "mempalace").is_dir()
        assert world.env["PATH"].split(os.pathsep)[0] == str(world.bin)
        assert {"mempalace-mcp", "mempalace-light-mcp", "mempalace",
                "mempalace-pi-session"} <= {p.name for p in world.bin.iterdir()}
    finally:
        world.close()


# -- the not-reached classification ------------------------------------------------------------


@pytest.mark.parametrize(("where", "quoted"), [
    ("effects", "[mempalace] spawn mempalace-mcp ENOENT | notify warning: MemPalace unavailable"),
    ("stderr", "bridge: loading | bridge: spawn mempalace-mcp ENOENT"),
])
def test_a_bridge_that_never_reaches_the_fake_is_one_not_testable_line(
        tmp_path: Path, where: str, quoted: str) -> None:
    result = run_scenario(shipped(REACHES), "stdio",
                          options(scripted(f"no-palace:{where}"), work_root=tmp_path))
    assert result.status == "not_testable" and result.blocking
    [check] = result.checks
    assert check.pointer == "/setup" and check.status == "fail"
    assert result.reason.startswith("Not testable: the bridge never reached the fake palace")
    assert result.reason.endswith(f"Its diagnostics: {quoted}")
    assert "\n" not in result.reason
    assert [s.op for s in result.steps] == ["load", "event", "settle", "call_tool", "shutdown",
                                            "exit"]  # every step ran; the evidence is kept


def test_scenarios_that_expect_no_palace_contact_keep_their_verdicts(tmp_path: Path) -> None:
    host = options(scripted("no-palace:effects"), work_root=tmp_path)
    for sid, transport in ((NOT_ON_PATH, "stdio"),
                           ("life.fail-closed.unreachable-at-load", "http")):
        result = run_scenario(shipped(sid), transport, host)
        # the scripted host answers the missing-tool call with ok: judged, not "not reached"
        assert result.status == "failed", (sid, result.reason)
        assert "never reached" not in result.reason
        assert "/steps/4/expect/error/kind" in {c.pointer for c in result.failures}


def test_a_host_that_hangs_is_reported_as_such_not_as_unreached(tmp_path: Path) -> None:
    result = run_scenario(shipped(REACHES), "stdio",
                          options(scripted("silent:call_tool"), op_timeout_ms=300, grace_ms=200,
                                  work_root=tmp_path))
    assert result.status == "failed" and "never reached" not in result.reason


def _scenario(tmp_path: Path, steps: list[dict[str, Any]], **extra: Any) -> Scenario:
    return write_scenario(tmp_path, {"id": "life.reach.case", "transports": ["stdio", "http"],
                                     "steps": [{"op": "load"}, *steps], **extra})


def test_which_scenarios_expect_palace_contact(tmp_path: Path) -> None:
    ok_call = {"op": "call_tool", "name": "mempalace_status", "args": {}}
    missing = {**ok_call, "expect": {"error": {"kind": "no_such_tool"}}}
    failing = {**ok_call, "expect": {"error": {"kind": "unavailable"}}}
    assert reach.expects_contact(_scenario(tmp_path, [ok_call]), "stdio")
    assert reach.expects_contact(_scenario(tmp_path, [failing]), "stdio")
    assert not reach.expects_contact(_scenario(tmp_path, [missing]), "stdio")
    assert not reach.expects_contact(_scenario(tmp_path, []), "stdio")
    assert not reach.expects_contact(
        _scenario(tmp_path, [ok_call], palace={"installed": False}), "stdio")
    http_only = _scenario(tmp_path, [{**ok_call, "transport": "http"}])
    assert reach.expects_contact(http_only, "http")
    assert not reach.expects_contact(http_only, "stdio")
    assert not reach.expects_contact(shipped("fake.lock.loser-is-read-only"), "stdio")


def test_a_call_of_call_tools_expects_contact_unless_every_call_expects_no_tool(
        tmp_path: Path) -> None:
    calls = {"op": "call_tools", "calls": [{"name": "mempalace_status"},
                                           {"name": "mempalace_nope"}]}
    missing = {"error": {"kind": "no_such_tool"}}
    known = {"op": "call_tools", "calls": [{"name": "mempalace_status"},
                                           {"name": "mempalace_search"}]}
    assert reach.expects_contact(_scenario(tmp_path, [known]), "stdio")
    assert reach.expects_contact(_scenario(tmp_path, [
        {**calls, "expect": {"calls": [{"ok": True}, missing]}}]), "stdio")
    assert not reach.expects_contact(_scenario(tmp_path, [
        {**calls, "expect": {"calls": [missing, missing]}}]), "stdio")


@pytest.mark.parametrize(("records", "reached"), [
    ([], False),
    ([{"kind": "process_start", "transport": "http", "argv": ["fake", "http"]}], False),
    ([{"kind": "process_start", "transport": "stdio", "argv": ["mempalace-mcp"]}], True),
    ([{"kind": "http_request", "transport": "http", "method": "POST"}], True),
    ([{"kind": "helper_run", "transport": "helper", "name": "mempalace-pi-session"}], True),
    ([{"kind": "cli_run", "transport": "cli", "command": "mine"}], True),
])
def test_what_counts_as_reaching_the_fake(records: list[dict[str, Any]], reached: bool) -> None:
    assert reach.contacted(records) is reached


def test_diagnostics_are_one_truncated_line_preferring_the_bridges_effects() -> None:
    step = StepRecord(0, "0", "load", ran=True, effects=[
        {"kind": "tool_registered", "name": "x"},
        {"kind": "stderr", "line": "first\n"}, {"kind": "stderr", "line": "x" * 500}])
    text = reach.diagnostics([step], "host says\nsomething else")
    assert text.startswith("first | xxx") and text.endswith("...") and len(text) == 300
    assert reach.diagnostics([StepRecord(0, "0", "load")], "a\n\n b \n") == "a | b"
    assert reach.diagnostics([], "") == "the bridge printed nothing"
    profiled = StepRecord(0, "0", "load", ran=True, effects=[  # a profile's notify as stderr
        {"kind": "notify", "level": "warning", "message": "no palace"},
        {"kind": "stderr", "line": "no palace", "via": "notify"}])
    assert reach.diagnostics([profiled], "") == "notify warning: no palace"


def test_the_hosts_stderr_is_read_only_for_a_run_that_never_reached_the_fake() -> None:
    asked: list[bool] = []

    def stderr() -> str:
        asked.append(True)
        return "host: no palace"

    ran = [StepRecord(0, "0", "load", ran=True), StepRecord(1, "1", "call_tool", ran=True)]
    scenario = shipped(REACHES)
    started = [{"kind": "process_start", "transport": "stdio"}]
    assert reach.unreached_reason(scenario, "stdio", ran, started, stderr) is None
    hung = [*ran[:1], StepRecord(1, "1", "call_tool", ran=True, failure="host did not answer")]
    assert reach.unreached_reason(scenario, "stdio", hung, [], stderr) is None
    assert asked == []
    reason = reach.unreached_reason(scenario, "stdio", ran, [], stderr)
    assert reason is not None and reason.endswith("Its diagnostics: host: no palace")
    assert asked == [True]


def test_a_refused_load_that_expected_ok_is_judged_not_unreached() -> None:
    """A bridge whose load raised where the scenario expects it to load (a malformed knob) broke
    a rule: judged as a failure, never 'not testable'. Without that expectation, or with a load
    that went through, a run that never reached the fake stays not testable."""
    scenario = shipped("knob.malformed.load-still-succeeds")
    [load] = [step for step in scenario.steps_for("stdio") if step.op == "load"]
    calls = [StepRecord(step.index, step.key, step.op, ran=True, ok=False)
             for step in scenario.steps_for("stdio") if step.op != "load"]
    refused = [StepRecord(load.index, load.key, "load", ran=True, ok=False), *calls]
    assert reach.refused_expected_load(scenario, "stdio", refused)
    assert reach.unreached_reason(scenario, "stdio", refused, [], lambda: "") is None
    loaded = [StepRecord(load.index, load.key, "load", ran=True, ok=True), *calls]
    assert not reach.refused_expected_load(scenario, "stdio", loaded)
    assert reach.unreached_reason(scenario, "stdio", loaded, [], lambda: "") is not None
    silent = shipped(REACHES)  # its load expects nothing: a refused load is the host's matter
    [plain] = [step for step in silent.steps_for("stdio") if step.op == "load"]
    assert plain.expect is None or plain.expect.ok is None
    unexpected = [StepRecord(plain.index, plain.key, "load", ran=True, ok=False)]
    assert not reach.refused_expected_load(silent, "stdio", unexpected)


def _result(sid: str, transport: str, status: str, journal: list[dict[str, Any]],
            said: str = "") -> Any:
    from palace_conformance.runner.results import ScenarioResult

    effects = [{"kind": "stderr", "line": said}] if said else []
    return ScenarioResult(scenario=sid, transport=transport, status=status, journal=journal,
                          steps=[StepRecord(index=0, key="load", op="load", ran=True, ok=True,
                                            effects=effects)])


def test_a_transport_never_reached_is_one_not_testable_line_quoting_the_bridge() -> None:
    from palace_conformance.runner.results import FAILED, NOT_APPLICABLE, NOT_TESTABLE, PASSED

    scenarios = {s: shipped(s) for s in (REACHES, NOT_ON_PATH, "tool.errors.codes-and-data-kept")}
    cli_run = [{"kind": "cli_run", "command": "search"}]  # the CLI is no transport
    recv = [{"kind": "recv", "transport": "stdio", "method": "initialize"}]
    said = "clionly: using the mempalace 3.11.0 CLI (no MCP server)"
    results = [_result(REACHES, "stdio", FAILED, cli_run, said),
               _result(NOT_ON_PATH, "stdio", PASSED, []),
               _result("tool.errors.codes-and-data-kept", "http", NOT_APPLICABLE, []),
               _result(REACHES, "http", FAILED, recv)]  # stdio child on an http run: unreached
    out = reach.collapse_unreached(results, scenarios, ("stdio", "http"))
    lines = {r.transport: r for r in out if r.scenario == reach.UNREACHED_ID}
    assert sorted(lines) == ["http", "stdio"]
    assert all(r.status == NOT_TESTABLE for r in lines.values())
    assert lines["stdio"].reason.startswith(f"{reach.UNREACHED} over stdio; its diagnostics: "
                                            f"{said}. None of the 2 scenario(s)")
    assert [(r.scenario, r.transport) for r in out if r.scenario != reach.UNREACHED_ID] == [
        ("tool.errors.codes-and-data-kept", "http")]  # not applicable stays as it was
    # one MCP request on the transport anywhere, and nothing is collapsed
    reached = [*results[:3], _result(REACHES, "http", FAILED,
                                     [{"kind": "recv", "transport": "http"}])]
    kept = reach.collapse_unreached(reached, scenarios, ("stdio", "http"))
    assert {r.transport for r in kept if r.scenario == reach.UNREACHED_ID} == {"stdio"}
    # a host that crashed keeps its failures: nothing says the bridge ran and missed the palace
    crashed = _result(REACHES, "stdio", FAILED, [])
    crashed.steps = [StepRecord(index=0, key="load", op="load", ran=False)]
    assert reach.collapse_unreached([crashed], scenarios, ("stdio",)) == [crashed]


@pytest.mark.parametrize("scenario_id,errno_name", [
    ("stdio.start.palace-exec-refused-no-interpreter", "ENOENT"),
    ("stdio.start.palace-exec-refused-not-a-program", "ENOEXEC")])
def test_an_unrunnable_palace_is_found_but_exec_refuses_it(tmp_path: Path, scenario_id: str,
                                                           errno_name: str) -> None:
    """palace.unrunnable: the only mempalace-mcp in reach passes every lookup (an executable
    regular file on the bridge's PATH) and only exec fails, with the errno it names."""
    import errno
    import shutil

    world = World(shipped(scenario_id), "stdio", work_root=tmp_path).open()
    try:
        found = shutil.which("mempalace-mcp", path=world.env["PATH"])
        installed = sorted(p.name for p in world.bin.iterdir())
        with pytest.raises(OSError) as refused:
            subprocess.run([str(world.bin / "mempalace-mcp")], env=world.env, check=False,
                           timeout=30)
        report = launch(world, "probe")
    finally:
        world.close()
    assert found == str(world.bin / "mempalace-mcp")
    assert installed == ["mempalace-mcp"]  # no other way to start a palace
    assert refused.value.errno == getattr(errno, errno_name)
    assert "No module named 'mempalace'" in report["probe"]["error"]
