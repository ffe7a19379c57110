"""Node hosts started ahead of need (runner/execution/node_pool.py) and Node's compile cache.

A pooled host must be, for the bridge it loads, the host its run would have started: the run's
directory, environment and host mark, nothing of the pool's. The whole-catalogue runs of the
copies (test_pi_copy.py, test_opencode_copy.py) take pooled hosts for every scenario; these
tests pin the parts one by one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from palace_conformance import processes as procs
from palace_conformance.hosts import node
from palace_conformance.runner.execution import node_pool
from palace_conformance.runner.execution.driver import DriverClient

from .support import EXTENSIONS, clean_env

WHEREAMI = f"pi-extension:{EXTENSIONS / 'whereami.ts'}"
DEADLINE_MS = 60000


def _where(client: DriverClient, env: dict[str, str]) -> dict[str, str]:
    """hello, a load without a cwd of its own, and the whereami tool's answer."""
    assert client.hello(DEADLINE_MS)["protocol"] == 1
    assert client.request("load", {"env": env}, deadline_ms=DEADLINE_MS).ok
    reply = client.request("call_tool", {"name": "whereami", "args": {}}, deadline_ms=DEADLINE_MS)
    assert reply.ok, reply.error
    answer: dict[str, str] = json.loads(reply.result["content"][0]["text"])
    return answer


def test_a_pooled_host_is_in_its_runs_directory_environment_and_mark(tmp_path: Path) -> None:
    argv = node.host_command(WHEREAMI)
    env = clean_env(tmp_path / "home", WHEREAMI="the run's")
    runs = []
    with node_pool.session(size=1):
        for n in range(2):  # the first starts its own host and fills the pool; the second takes
            run_dir = tmp_path / f"run{n}"
            run_dir.mkdir()
            client = DriverClient(argv, env=env, cwd=run_dir)
            given = client.mark
            with client.start():
                runs.append((run_dir, given, client.mark, _where(client, env)))
    (cold_dir, cold_given, cold_mark, cold), (pooled_dir, given, mark, pooled) = runs
    assert cold_mark == cold_given and mark != given, "the second run did not take a pooled host"
    for run_dir, its_mark, seen in ((cold_dir, cold_mark, cold), (pooled_dir, mark, pooled)):
        assert seen == {"cwdAtImport": str(run_dir), "pwd": str(run_dir), "mark": its_mark,
                        "pooled": "unset", "whereami": "the run's"}


def test_a_run_whose_startup_variables_differ_takes_no_pooled_host(tmp_path: Path) -> None:
    argv = node.host_command(WHEREAMI)
    env = clean_env(tmp_path / "home")
    taken = []
    try:
        with node_pool.session(size=1):
            assert node_pool.take(argv, env, tmp_path) is None  # nothing started yet
            taken.append(node_pool.take(argv, env, tmp_path))
            assert taken[0] is not None
            for other in ({"NODE_OPTIONS": "--no-warnings"}, {"LANG": "tr_TR.UTF-8"},
                          {"TZ": "Pacific/Chatham"}, {node_pool.POOLED_VARIABLE: "1"}):
                assert node_pool.take(argv, {**env, **other}, tmp_path) is None, other
            assert node_pool.take(["node", *argv[4:]], env, tmp_path) is None  # not a kit host
    finally:
        for host in taken:
            if host is not None:
                node_pool._stop(host)
    assert node_pool.take(argv, env, tmp_path) is None, "outside a session nothing is pooled"


def test_idle_hosts_stop_when_the_session_ends(tmp_path: Path) -> None:
    argv = node.host_command(WHEREAMI)
    env = clean_env(tmp_path / "home")
    with node_pool.session(size=2) as pool:
        assert node_pool.take(argv, env, tmp_path) is None
        idle = [host.proc for hosts in pool._idle.values() for host in hosts]
        assert len(idle) == 2 and all(proc.poll() is None for proc in idle)
    assert all(proc.poll() is not None for proc in idle)
    assert not any(Path(f"/proc/{proc.pid}").exists() and proc.returncode is None
                   for proc in idle)


def test_a_pooled_host_answers_nothing_before_adopt(tmp_path: Path) -> None:
    argv = node.host_command(WHEREAMI)
    env = {**clean_env(tmp_path / "home"), node_pool.POOLED_VARIABLE: "1"}
    done = subprocess.run(argv, input=json.dumps({"id": 1, "op": "hello"}) + "\n",
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
                          check=False)
    reply = json.loads(done.stdout.splitlines()[0])
    assert reply["ok"] is False and reply["error"]["kind"] == "bad_request"
    assert "adopt first" in reply["error"]["message"] and done.returncode == 2


def test_a_host_runs_with_the_kits_compile_cache_or_the_one_the_environment_names(
        tmp_path: Path, node_hosts: node.Installation) -> None:
    mine = tmp_path / "my-compile-cache"
    for extra, expected in (({}, node.compile_cache_dir(node_hosts)),
                            ({"NODE_COMPILE_CACHE": str(mine)}, mine)):
        client = DriverClient(node.host_command(WHEREAMI), warm=False, cwd=tmp_path,
                              env=clean_env(tmp_path / "home", **extra))
        with client.start():
            _where(client, clean_env(tmp_path / "home"))
            assert client.pid is not None  # sh exec'd node: the pid is Node's
            environ = Path(f"/proc/{client.pid}/environ").read_bytes().split(b"\0")
            assert f"NODE_COMPILE_CACHE={expected}".encode() in environ
            client.request("exit", deadline_ms=DEADLINE_MS)
            deadline = time.monotonic() + 30
            while client.proc is not None and client.proc.poll() is None:
                assert time.monotonic() < deadline, "the host did not exit"
                time.sleep(0.05)
    assert any(p.is_file() for p in mine.rglob("*")), "Node wrote no compiled code there"


@pytest.mark.parametrize("variable", ["NODE_OPTIONS", "LC_ALL", "UV_THREADPOOL_SIZE", "TZ"])
def test_startup_environment_keeps_what_node_reads_as_it_starts(variable: str) -> None:
    env = {variable: "x", "HOME": "/h", "PATH": os.defpath, "MEMPALACE_REMOTE_TOKEN": "t"}
    assert node_pool.startup_environment(env) == ((variable, "x"),)


def test_a_pooled_host_that_died_waiting_is_passed_over(tmp_path: Path) -> None:
    argv = node.host_command(WHEREAMI)
    env = clean_env(tmp_path / "home")
    with node_pool.session(size=1) as pool:
        assert node_pool.take(argv, env, tmp_path) is None
        (waiting,) = [host for hosts in pool._idle.values() for host in hosts]
        waiting.proc.kill()
        waiting.proc.wait(30)
        assert node_pool.take(argv, env, tmp_path) is None  # dead: the run starts its own
        client = DriverClient(argv, env=env, cwd=tmp_path)  # ... and that works
        with client.start():
            assert _where(client, env)["pwd"] == str(tmp_path)


def test_waiting_hosts_leave_when_their_runner_is_killed(tmp_path: Path) -> None:
    """A runner killed with SIGKILL runs no cleanup: the waiting hosts see their stdin end."""
    code = (
        "import json, os, sys, time\n"
        "from palace_conformance.hosts import node\n"
        "from palace_conformance.runner.execution import node_pool\n"
        "argv = node.host_command(sys.argv[1])\n"
        "env = {'HOME': sys.argv[2], 'PATH': os.defpath}\n"
        "with node_pool.session(size=2) as pool:\n"
        "    node_pool.take(argv, env, sys.argv[2])\n"
        "    print(json.dumps([h.proc.pid for q in pool._idle.values() for h in q]), flush=True)\n"
        "    time.sleep(600)\n")
    runner = subprocess.Popen([sys.executable, "-c", code, WHEREAMI, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout is not None
        pids = json.loads(runner.stdout.readline())
        assert len(pids) == 2
    finally:
        runner.kill()
        runner.wait(30)
    deadline = time.monotonic() + 30
    while any(procs.alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"waiting hosts {pids} outlived their runner"
        time.sleep(0.1)


def test_a_pool_that_cannot_start_hosts_leaves_runs_to_start_their_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> node_pool.PooledHost:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(node_pool, "_start", refuse)
    argv = node.host_command(WHEREAMI)
    with node_pool.session(size=2):
        assert node_pool.take(argv, clean_env(tmp_path / "home"), tmp_path) is None
