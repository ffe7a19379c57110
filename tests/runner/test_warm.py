"""Warm starts (runner/execution/warm_client.py, warm_server.py): a forked child must be
indistinguishable from a fresh process to everything a scenario can observe, and anything the warm
server cannot do must start cold."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from palace_conformance import processes as procs
from palace_conformance.fake.options import TOKEN_ENV
from palace_conformance.hosts import REFERENCE_HOST
from palace_conformance.runner.execution import warm_client as warm
from palace_conformance.runner.execution.driver import DriverClient
from palace_conformance.runner.execution.execute import RunOptions, run_scenario
from palace_conformance.runner.execution.world import scrubbed_environ
from palace_conformance.runner.results import ScenarioResult
from palace_conformance.scenarios.loader import load_scenario, scenarios_dir
from palace_conformance.scenarios.model import Scenario

CLI = list(warm.LAUNCH_ARGV)


@pytest.fixture
def server() -> Iterator[warm.WarmServer]:
    """A private warm server, so a test that breaks it breaks nobody else's."""
    own = warm.WarmServer()
    yield own
    own.close()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = scrubbed_environ()
    env["HOME"] = str(tmp_path)
    env.update(extra)
    return env


def _wait_for(path: Path, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def test_only_the_runners_own_programs_are_recognised() -> None:
    host = warm.entry_for([*REFERENCE_HOST, "--mutant", "x"])
    assert host == warm.Entry("palace_conformance.hosts.reference", None, ("--mutant", "x"))
    assert warm.entry_for([*CLI, "fake", "http"]) == warm.Entry("palace_conformance.cli", "-c",
                                                                ("fake", "http"))
    assert warm.entry_for(["node", "host.mjs"]) is None
    assert warm.entry_for([sys.executable, "-c", "print(1)"]) is None
    assert warm.entry_for(["/other/python", *REFERENCE_HOST[1:]]) is None


def test_a_warm_child_has_its_own_cwd_env_session_and_dies_by_its_signal(
        tmp_path: Path, server: warm.WarmServer) -> None:
    proc = warm.popen([*CLI, "fake", "http", "--port", "0", "--ready-file", "ready.json"],
                      env=_env(tmp_path, **{TOKEN_ENV: "s3cret"}), cwd=tmp_path,
                      stderr=subprocess.PIPE, server=server)
    try:
        _wait_for(tmp_path / "ready.json")  # a relative path: the child runs in its own cwd
        port = json.loads((tmp_path / "ready.json").read_text())["port"]
        assert os.getsid(proc.pid) == proc.pid and os.getpgid(proc.pid) == proc.pid
        assert proc.pid != server._proc.pid and procs.alive(proc.pid)  # type: ignore[union-attr]
        answer = httpx.post(f"http://127.0.0.1:{port}/mcp", json={}, timeout=5)
        assert answer.status_code == 401  # the token came from the child's own environment
        assert proc.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.05)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(5) == -signal.SIGKILL  # as subprocess.Popen reports a signal
    finally:
        proc.kill()
        if proc.stderr is not None:
            proc.stderr.close()


def test_exit_codes_and_standard_streams_are_the_childs(tmp_path: Path,
                                                      server: warm.WarmServer) -> None:
    listing = warm.popen([*CLI, "fixtures", "list"], env=_env(tmp_path), cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, server=server)
    assert listing.stdout is not None and listing.stderr is not None
    out = listing.stdout.read().decode()
    assert listing.wait(30) == 0
    assert "wake.fresh-session.inject-once" in out
    wrong = warm.popen([*CLI, "--no-such-flag"], env=_env(tmp_path), cwd=tmp_path,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, server=server)
    assert wrong.stderr is not None and wrong.stdout is not None
    err = wrong.stderr.read().decode()
    assert wrong.wait(30) == 2 and "(see --help)" in err
    for stream in (listing.stdout, listing.stderr, wrong.stdout, wrong.stderr):
        stream.close()


def test_other_commands_and_a_broken_server_start_cold(tmp_path: Path) -> None:
    with pytest.raises(warm.WarmStartUnavailable):
        warm.popen(["sh", "-c", "exit 3"], env=_env(tmp_path), cwd=tmp_path)
    cold = warm.start(["sh", "-c", "exit 3"], warm=True, env=_env(tmp_path), cwd=tmp_path)
    assert isinstance(cold, subprocess.Popen) and cold.wait(10) == 3
    broken = warm.WarmServer()
    broken._broken = "no fork server on this platform"
    with pytest.raises(warm.WarmStartUnavailable, match="no fork server"):
        warm.popen([*CLI, "fixtures", "list"], env=_env(tmp_path), cwd=tmp_path, server=broken)
    fallback = warm.start([*CLI, "fixtures", "list"], warm=True, env=_env(tmp_path),
                          cwd=tmp_path, stdout=subprocess.DEVNULL, server=broken)
    assert isinstance(fallback, subprocess.Popen) and fallback.wait(30) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG)")
def test_a_child_dies_with_a_dead_server_its_wait_ends_and_the_server_comes_back(
        tmp_path: Path, server: warm.WarmServer) -> None:
    """A warm child must not outlive its server (a runner killed with its process group takes
    the server, not the child in its own session: docs/runner.md); the runner's wait for it
    still ends, with the exit nobody could read, and the next start gets a new server."""
    proc = warm.popen([*CLI, "fake", "http", "--port", "0", "--ready-file", "ready.json"],
                      env=_env(tmp_path), cwd=tmp_path, server=server)
    try:
        _wait_for(tmp_path / "ready.json")
        assert server._proc is not None and procs.alive(proc.pid)
        server._proc.kill()
        server._proc.wait(5)
        assert proc.wait(30) == warm.UNKNOWN_EXIT  # nobody could tell its real exit code
        deadline = time.monotonic() + 30
        while procs.alive(proc.pid):
            assert time.monotonic() < deadline, "the warm child outlived its server"
            time.sleep(0.02)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    again = warm.popen([*CLI, "fixtures", "list"], env=_env(tmp_path), cwd=tmp_path,
                       stdout=subprocess.DEVNULL, server=server)
    assert again.wait(30) == 0  # a dead server is started again


def test_the_driver_forks_the_reference_host_warm_unless_told_not_to(tmp_path: Path) -> None:
    with DriverClient(REFERENCE_HOST, env=_env(tmp_path), cwd=tmp_path) as host:
        assert isinstance(host.proc, warm.WarmProcess)
        assert host.hello()["protocol"] == 1
        assert os.getsid(host.proc.pid) == host.proc.pid
        host.request("exit", {"timeout_ms": 2000}, deadline_ms=2000)
        assert host.proc.wait(5) == 0
    with DriverClient(REFERENCE_HOST, env=_env(tmp_path), cwd=tmp_path, warm=False) as host:
        assert isinstance(host.proc, subprocess.Popen)
        assert host.hello()["protocol"] == 1


WARM_AND_COLD = (
    "life.shutdown.stuck-child-term-then-kill",  # signals, process groups, leftovers
    "http.connect.refused-token-retries-bounded",  # the HTTP fake's token from its env
    "wake.fresh-session.inject-once",  # what the agent sees
)


def _shipped(scenario_id: str) -> Scenario:
    return load_scenario(scenarios_dir() / scenario_id.split(".", 1)[0] / f"{scenario_id}.json")


@pytest.mark.parametrize(("scenario_id", "transport"), [
    (sid, transport) for sid in WARM_AND_COLD for transport in _shipped(sid).transports])
def test_warm_and_cold_runs_have_the_same_outcome(scenario_id: str, transport: str,
                                                  tmp_path: Path) -> None:
    """One item per transport, and the warm and the cold run side by side (the runner runs
    scenarios in threads too): their waits overlap instead of adding up."""
    scenario = _shipped(scenario_id)

    def run(warm_start: bool) -> ScenarioResult:
        options = RunOptions(host_argv=REFERENCE_HOST, work_root=tmp_path, warm_start=warm_start)
        return run_scenario(scenario, transport, options)

    with ThreadPoolExecutor(max_workers=2) as pool:
        warm_result, cold_result = pool.map(run, (True, False))
    assert warm_result.status == cold_result.status == "passed", (
        warm_result.reason, cold_result.reason)
    assert warm_result.outcome == cold_result.outcome


def test_a_module_in_the_working_directory_shadows_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: warm.WarmServer) -> None:
    """Python puts the working directory first on ``sys.path`` for ``-c`` and ``-m``. The
    runner's own programs start with ``-P``, so a ``palace_bridge/``, a ``palace_conformance/``
    or a ``json.py`` where the runner is run, or in a run directory a scenario writes into, is
    never imported in place of the real one: warm (the server starts in the runner's working
    directory) or cold."""
    planted = tmp_path / "planted"
    for name in ("palace_bridge/__init__.py", "palace_conformance/__init__.py", "json.py"):
        (planted / name).parent.mkdir(parents=True, exist_ok=True)
        (planted / name).write_text(f"raise SystemExit('imported the planted {name}')\n")
    monkeypatch.chdir(planted)
    hello = b'{"id": 1, "op": "hello"}\n'
    host = warm.popen(list(REFERENCE_HOST), env=_env(tmp_path), cwd=planted,
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      server=server)
    assert isinstance(host, warm.WarmProcess)
    assert host.stdin is not None and host.stdout is not None and host.stderr is not None
    host.stdin.write(hello)
    host.stdin.flush()
    warm_answer = host.stdout.readline()
    host.stdin.close()
    assert host.wait(30) == 0, host.stderr.read()
    for stream in (host.stdout, host.stderr):
        stream.close()
    cold = subprocess.run(REFERENCE_HOST, input=hello, cwd=planted, env=_env(tmp_path),
                          capture_output=True, timeout=60, check=False)
    for answer in (warm_answer, cold.stdout.splitlines()[0] if cold.stdout else b""):
        assert json.loads(answer)["result"]["protocol"] == 1, (answer, cold.stderr)
    fake = subprocess.run([*warm.LAUNCH_ARGV, "fixtures", "list"], cwd=planted,
                          env=_env(tmp_path), capture_output=True, timeout=60, check=False)
    assert fake.returncode == 0, fake.stderr


def test_the_warm_server_builds_the_cli_parser_its_forked_cli_takes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm server builds the CLI's parser before it forks (an HTTP fake is the CLI's
    ``fake http``): the next ``main`` takes it instead of building one, and only that one."""
    from palace_conformance import cli
    from palace_conformance.runner.execution import warm_server

    built: list[int] = []
    real = cli.build_parser

    def counting() -> object:
        built.append(1)
        return real()

    monkeypatch.setattr(cli, "build_parser", counting)
    monkeypatch.setattr(cli, "_PREBUILT", [])
    warm_server._warm_up()
    assert len(built) == 1 and len(cli._PREBUILT) == 1
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert len(built) == 1 and cli._PREBUILT == []  # taken, not built again
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert len(built) == 2  # a second main in the same process builds its own
