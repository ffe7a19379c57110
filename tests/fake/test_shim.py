"""``palace-conformance fake install-shim``: ``mempalace-mcp`` and ``mempalace`` that run the fake.

A bridge under test finds the shims first on PATH, so it spawns the fake without knowing it, and
a bridge that wrongly shells out to the ``mempalace`` CLI leaves a ``cli_run`` record behind.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .stdio_harness import FakeProcess, clean_env, payload, run_cli


def install(tmp_path: Path) -> Path:
    shims = tmp_path / "shims"
    result = run_cli(["fake", "install-shim", str(shims)], tmp_path)
    assert result.returncode == 0, result.stderr
    printed = set(result.stdout.split())
    assert {str(shims / "mempalace-mcp"), str(shims / "mempalace")} <= printed
    for name in ("mempalace-mcp", "mempalace"):
        assert os.access(shims / name, os.X_OK)
    return shims


def test_mempalace_mcp_shim_serves_and_names_itself_as_the_lock_holder(tmp_path: Path) -> None:
    shims = install(tmp_path)
    home, palace = tmp_path / "home", tmp_path / "palace"
    shared = {"home": home, "palace": palace, "journal": tmp_path / "journal.jsonl"}
    with FakeProcess(tmp_path / "a", command=[str(shims / "mempalace-mcp")], **shared) as a, \
            FakeProcess(tmp_path / "b", command=[str(shims / "mempalace-mcp")], **shared) as b:
        init = a.request("initialize", {"protocolVersion": "2025-06-18"})
        assert init["result"]["serverInfo"] == {"name": "mempalace", "version": "3.11.0"}
        assert payload(a.call("mempalace_diary_write", {"agent_name": "a", "entry": "x"}))
        reason = b.call("mempalace_diary_write", {"agent_name": "b", "entry": "y"})["error"][
            "data"]["reason"]
        assert f"is held by PID {a.pid} ({shims / 'mempalace-mcp'} --palace {palace});" in reason
        a.close_stdin()
        assert a.wait() == 0


def test_mempalace_cli_shim_mine_under_contention(tmp_path: Path) -> None:
    shims = install(tmp_path)
    with FakeProcess(tmp_path, command=[str(shims / "mempalace-mcp")]) as holder:
        holder.call("mempalace_diary_write", {"agent_name": "a", "entry": "holds the lease"})
        env = clean_env(holder.home, PATH=f"{shims}{os.pathsep}{os.environ['PATH']}",
                        PALACE_FAKE_JOURNAL=str(holder.journal_path))
        mine = subprocess.run(["mempalace", "--palace", str(holder.palace), "mine", str(tmp_path)],
                              capture_output=True, text=True, env=env, timeout=30)
        assert mine.returncode == 1 and mine.stdout == ""
        assert mine.stderr == (
            f"mempalace: palace {holder.palace} is held by PID {holder.pid} "
            f"({shims / 'mempalace-mcp'} --palace {holder.palace}); wait for it to finish or "
            "stop the holder before retrying\n")
        other = subprocess.run(["mempalace", "repair"], capture_output=True, text=True,
                               env=env, timeout=30)
        assert other.returncode == 2 and "only --version, mine, status, search" in other.stderr
        runs = holder.records("cli_run")
    assert [(r["command"], r["exit_code"]) for r in runs] == [("mine", 1), ("repair", 2)]


def test_the_cli_answers_its_version_and_the_common_reads_from_the_same_palace(
        tmp_path: Path) -> None:
    """``--version`` as 3.11.0, and ``status``, ``search`` and ``wake-up`` read the palace the
    scenario's servers share (a drawer filed over MCP is found by the CLI), each journaled."""
    shims = install(tmp_path)
    state = tmp_path / "state.json"
    with FakeProcess(tmp_path, command=[str(shims / "mempalace-mcp")], state=state) as server:
        filed = payload(server.call("mempalace_add_drawer", {
            "wing": "w", "room": "r", "content": "the lighthouse keeper's notes"}))
        assert filed["success"] is True
        env = clean_env(server.home, PATH=f"{shims}{os.pathsep}{os.environ['PATH']}",
                        PALACE_FAKE_JOURNAL=str(server.journal_path),
                        PALACE_FAKE_STATE=str(state))

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["mempalace", *args], capture_output=True, text=True,
                                  env=env, timeout=30)

        version = cli("--version")
        assert (version.returncode, version.stdout) == (0, "mempalace 3.11.0\n")
        found = cli("search", "lighthouse")
        assert found.returncode == 0, found.stderr
        hits = json.loads(found.stdout)
        assert hits["query"] == "lighthouse"
        assert any("lighthouse" in hit["text"] for hit in hits["results"])
        status = json.loads(cli("status").stdout)
        assert status["total_drawers"] == 1
        woken = json.loads(cli("wake-up").stdout)
        assert woken["status"] == status and "diary" in woken
        runs = server.records("cli_run")
    assert [(r["command"], r["exit_code"]) for r in runs] == [
        ("--version", 0), ("search", 0), ("status", 0), ("wake-up", 0)]
    assert runs[0]["argv"][0] == str(shims / "mempalace")


def test_install_shim_into_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run_cli(["fake", "install-shim", str(blocker / "sub")], tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith(f"palace-conformance fake install-shim: cannot write to "
                                    f"{blocker / 'sub'}: ")
    assert result.stderr.count("\n") == 1


def test_uninstall_removes_exactly_what_install_placed(tmp_path: Path) -> None:
    """A person's own files in the directory stay, and so does a shim they edited since."""
    directory = tmp_path / "bin"
    directory.mkdir()
    (directory / "my-tool").write_text("#!/bin/sh\necho mine\n")
    done = run_cli(["fake", "install-shim", str(directory)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (directory / "mempalace-mcp").is_file() and (directory / ".palace").is_dir()
    edited = directory / "mempalace"
    edited.write_text("#!/bin/sh\necho my own mempalace\n")
    done = run_cli(["fake", "uninstall-shim", str(directory)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in directory.iterdir()) == ["mempalace", "my-tool"]
    assert "kept" in done.stderr and "mempalace: it changed since" in done.stderr
    again = run_cli(["fake", "uninstall-shim", str(directory)], tmp_path)
    assert again.returncode == 2 and "no shim installed" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


def test_uninstall_removes_the_directory_install_created(tmp_path: Path) -> None:
    directory = tmp_path / "fresh" / "shim"
    assert run_cli(["fake", "install-shim", str(directory)], tmp_path).returncode == 0
    assert run_cli(["fake", "install-shim", str(directory)], tmp_path).returncode == 0  # again
    done = run_cli(["fake", "uninstall-shim", str(directory)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert not directory.exists() and (tmp_path / "fresh").is_dir()


#: what the official TypeScript SDK's StdioClientTransport passes a child by default
SDK_DEFAULT_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def test_a_child_with_the_sdk_default_environment_still_reaches_its_run(tmp_path: Path) -> None:
    """The run's settings ride in the shim directory: the shim and ``python -m
    mempalace.mcp_server`` (the shim's Python) journal into the run's journal though the child
    got none of ``PALACE_FAKE_*``; a variable it did inherit wins."""
    from palace_conformance.fake.shims import install_shim, uninstall_shim, venv_python

    shims, journal, other = tmp_path / "shims", tmp_path / "journal.jsonl", tmp_path / "own.jsonl"
    install_shim(shims, python_package=True,
                 settings={"PALACE_FAKE_JOURNAL": str(journal),
                           "PALACE_FAKE_STATE": str(tmp_path / "state.json")})
    env = {k: v for k, v in os.environ.items() if k in SDK_DEFAULT_ENV}
    env["PATH"] = f"{shims}{os.pathsep}{env.get('PATH', os.defpath)}"
    env["HOME"] = str(tmp_path)
    hello = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
             '{"protocolVersion":"2025-06-18","capabilities":{},'
             '"clientInfo":{"name":"t","version":"1"}}}\n')
    for argv in (["mempalace-mcp"], [str(venv_python(shims)), "-m", "mempalace.mcp_server"]):
        done = subprocess.run(argv, input=hello, capture_output=True, text=True, env=env,
                              timeout=60)
        assert '"serverInfo"' in done.stdout, done.stderr
    starts = [line for line in journal.read_text().splitlines() if '"process_start"' in line]
    assert len(starts) == 2
    before = journal.read_text()
    done = subprocess.run(["mempalace-mcp"], input=hello, capture_output=True, text=True,
                          env={**env, "PALACE_FAKE_JOURNAL": str(other)}, timeout=60)
    assert '"process_start"' in other.read_text() and done.returncode == 0
    assert journal.read_text() == before  # the inherited variable won
    removed, kept = uninstall_shim(shims)
    assert kept == [] and shims / ".palace-world.json" in removed
