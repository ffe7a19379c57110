"""``palace-bridge`` against the fake: a stall is a timeout, a crash a respawn, a 404 a renewal.

Each command (``tools``, ``call``, ``run``) has one test that runs the real command in a
subprocess; the others run its ``main`` in this process with the same environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from .support import SLACK_S, Done, HttpFake, Scenario, bridge_in_process, remote_env

CLI = [sys.executable, "-m", "palace_bridge.cli"]


def bridge(env: dict[str, str], *args: str, stdin: str | None = None,
           timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def scenario(tmp_path):
    return Scenario(tmp_path)


@pytest.fixture
def in_process(monkeypatch, capsys):
    def command(env: dict[str, str], *args: str, stdin: str = "") -> Done:
        return bridge_in_process(monkeypatch, capsys, env, *args, stdin=stdin)

    return command


def test_tools_prints_every_tool_with_its_schema(scenario):
    """The smoke test of ``tools``."""
    proc = bridge(scenario.env, "tools")
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)
    assert len(tools) == 47
    status = next(t for t in tools if t["name"] == "mempalace_status")
    assert status["inputSchema"] == {"type": "object", "properties": {}}
    assert status["annotations"] == {"readOnlyHint": True}


def test_call_prints_the_result_as_json(scenario):
    """The smoke test of ``call``."""
    proc = bridge(scenario.env, "call", "mempalace_status", "{}")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert json.loads(result["content"][0]["text"])["total_drawers"] == 0
    assert proc.stderr == ""


def test_a_reader_that_goes_away_is_no_error(scenario):
    """``palace-bridge tools | head -1``: stdout closed before the answer is written."""
    proc = subprocess.Popen([*CLI, "tools"], env=scenario.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the first write, which then meets a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_stall_is_a_timeout_within_timeout_plus_slack(scenario, in_process):
    scenario.faults = ["stall@mempalace_status"]
    env = scenario.env
    env["MEMPALACE_MCP_TIMEOUT_MS"] = "400"
    began = time.monotonic()
    proc = in_process(env, "call", "mempalace_status")
    elapsed = time.monotonic() - began
    assert proc.returncode == 4
    assert proc.stderr.strip().splitlines() == [
        "palace-bridge: mempalace request tools/call timed out after 400 ms"]
    call = next(r for r in scenario.received("tools/call"))
    kill = next(r for r in scenario.records("signal"))
    # the fake journals the call a moment after our clock started: allow that moment
    assert 0.38 <= kill["t"] - call["t"] < 0.4 + SLACK_S, "timed out, then killed the child"
    assert elapsed < 0.4 + 2 * SLACK_S + 2.0  # interpreter start-up included


def test_run_answers_a_line_nested_too_deeply_and_goes_on(scenario):
    """Issue 13: a RecursionError from ``json.loads`` ended ``run`` with a traceback."""
    lines = "[" * 100_000 + "]" * 100_000 + "\n" + json.dumps({"tool": "mempalace_status"}) + "\n"
    proc = bridge(scenario.env, "run", stdin=lines)
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [answer["ok"] for answer in out] == [False, True], proc.stderr
    assert out[0]["error"]["type"] == "UsageError"
    assert "Traceback" not in proc.stderr


def test_crash_is_a_respawn_with_a_new_pid(scenario):
    """The smoke test of ``run``: calls read from a real stdin pipe."""
    scenario.faults = ["exit@mempalace_status#1,code=75"]
    lines = "\n".join(json.dumps({"tool": "mempalace_status"}) for _ in range(2)) + "\n"
    proc = bridge(scenario.env, "run", stdin=lines)
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert out[0]["ok"] is False and out[0]["error"]["type"] == "PalaceConnectionClosed"
    assert out[1]["ok"] is True
    pids = scenario.pids()
    assert len(pids) == 2 and pids[0] != pids[1]
    assert out[1]["child_pids"] == [pids[1]]
    exits = scenario.records("process_exit")
    assert exits[0]["pid"] == pids[0] and exits[0]["code"] == 75


def test_crash_at_startup_is_respawned_inside_one_call(scenario, in_process):
    scenario.faults = ["startup_fail@$startup,code=1,stderr=palace is held by PID 4242"]
    proc = in_process(scenario.env, "call", "mempalace_status")
    assert proc.returncode == 0, proc.stderr
    assert len(scenario.pids()) == 2


def test_404_is_one_reinitialize_and_one_retry(tmp_path, in_process):
    fake = HttpFake(tmp_path, sessions=True, faults=["forget_session@mempalace_status"])
    try:
        proc = in_process(remote_env(fake.url), "call", "mempalace_status")
        methods = [r.get("method") for r in fake.received()]
        statuses = [r["status"] for r in fake.records("http_response")]
    finally:
        fake.close()
    assert proc.returncode == 0, proc.stderr
    assert methods == ["initialize", "notifications/initialized", "tools/list", "tools/call",
                       "initialize", "notifications/initialized", "tools/call"]
    assert statuses.count(404) == 1


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["call", "mempalace_diary_read", '{"agent": "x"}'], 1,
     "mempalace error -32602: Unknown parameter 'agent' for tool mempalace_diary_read"),
    (["call", "mempalace_status", "[1]"], 2, "JSON-ARGS must be a JSON object"),
    (["call", "mempalace_status", "{oops"], 2, "JSON-ARGS is not JSON"),
    # issue 13: past the decoder's recursion limit, past int()'s digit limit
    (["call", "mempalace_status", "[" * 100_000], 2, "JSON-ARGS is not JSON (nested too deeply)"),
    (["call", "mempalace_status", '{"limit": ' + "9" * 5000 + "}"], 2,
     "JSON-ARGS is not JSON (Exceeds the limit (4300 digits)"),
])
def test_failures_are_one_line_and_a_distinct_exit_code(scenario, in_process, args, code,
                                                         needle):
    proc = in_process(scenario.env, *args)
    assert proc.returncode == code
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]
    assert "Traceback" not in proc.stderr


def test_unavailable_local_palace_exits_3_with_one_line(tmp_path, in_process):
    scenario = Scenario(tmp_path)
    env = scenario.env
    env["PATH"] = str(tmp_path / "nothing-here")
    proc = in_process(env, "call", "mempalace_status")
    assert proc.returncode == 3
    assert proc.stderr.strip().splitlines() == [
        "mempalace-mcp unavailable (mempalace-mcp not found on PATH); "
        "continuing without palace tools",
        "palace-bridge: local palace (mempalace-mcp) unavailable: mempalace-mcp not found on PATH"]


def test_unreachable_remote_exits_3_with_the_seed_line(in_process):
    env = remote_env("http://127.0.0.1:9/mcp", MEMPALACE_REMOTE_CONNECT_RETRIES="1")
    proc = in_process(env, "tools")
    assert proc.returncode == 3
    seed, ours = proc.stderr.strip().splitlines()
    assert seed == "mempalace-mcp unavailable after retries; continuing without palace tools"
    # the bridge's own notice names mempalace-mcp; the command says where and why
    assert ours.startswith("palace-bridge: remote palace http://127.0.0.1:9/mcp unavailable: ")


def test_a_refused_token_at_connect_is_named_and_has_its_own_exit_code(tmp_path, in_process):
    """A 401 at connect was visible only with MEMPALACE_EXT_DEBUG=1, and exited 3 like an
    unreachable palace; the fix is the token, not the palace."""
    fake = HttpFake(tmp_path, token="right-token-8c1e")
    try:
        env = remote_env(fake.url, MEMPALACE_REMOTE_TOKEN="wrong-token-77aa",
                         MEMPALACE_REMOTE_CONNECT_RETRIES="0")
        proc = in_process(env, "tools")
    finally:
        fake.close()
    assert proc.returncode == 6, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"palace-bridge: remote palace {fake.url} unavailable: ")
    assert "401" in last and last.endswith("check MEMPALACE_REMOTE_TOKEN")
    assert "wrong-token-77aa" not in proc.stderr
    # what happened, once: no second hint, no "HTML error page" for the fake's HTML 401 body
    assert last.count("MEMPALACE_REMOTE_TOKEN") == 1 and "HTML" not in last, last
    assert last.endswith("unavailable: mempalace refused the credentials (HTTP 401); check "
                         "MEMPALACE_REMOTE_TOKEN"), last


def test_a_lock_error_line_keeps_the_holder(tmp_path, in_process):
    """-32001's data.reason names the PID holding the palace: what a person needs next."""
    scenario = Scenario(tmp_path, faults=["lock_held@mempalace_add_drawer,pid=4242"])
    proc = in_process(scenario.env, "call", "mempalace_add_drawer",
                      '{"wing": "w", "room": "r", "content": "c"}')
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert "-32001" in line and "PID 4242" in line, line
