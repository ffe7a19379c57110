"""FAKE-06: the single-writer lock with real processes sharing one HOME and palace.

The lock is a kernel ``flock`` on the file mempalace uses, so these are the same races two real
``mempalace-mcp`` servers run: first lease-taking write wins, the loser answers -32001 (reads and
lease-exempt writes still work), and the loser takes over once the holder is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from palace_conformance.fake.lease import lock_file_for

from .stdio_harness import (
    FAKE_MCP,
    PALACE_CONFORMANCE,
    PROMPT,
    FakeProcess,
    clean_env,
    kill_group,
    payload,
    run_cli,
)

PEER = "Peer MCP writer active; this server is read-only for mutating tools"


def holder_reason(palace: Path, pid: int, argv: str) -> str:
    return (f"another mempalace writer already holds the palace lock for '{palace}': palace "
            f"{palace} is held by PID {pid} ({argv}); wait for it to finish or stop the holder "
            "before retrying")


def fake_argv(palace: Path) -> str:
    return f"{FAKE_MCP} --palace {palace}"


def pair(tmp_path: Path) -> tuple[FakeProcess, FakeProcess]:
    shared = {"home": tmp_path / "home", "palace": tmp_path / "palace",
              "state": tmp_path / "state.json", "journal": tmp_path / "journal.jsonl"}
    return (FakeProcess(tmp_path / "a", name="A", **shared),
            FakeProcess(tmp_path / "b", name="B", **shared))


def assert_refused(reply: dict[str, Any], tool: str, palace: Path, pid: int, argv: str) -> None:
    assert reply["error"] == {
        "code": -32001, "message": PEER,
        "data": {"tool": tool, "palace": str(palace),
                 "reason": holder_reason(palace, pid, argv), "failure_kind": "peer_contention"},
    }


def test_first_writer_wins_loser_refuses_writes_and_self_promotes(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    with a, b:
        palace = a.palace
        assert payload(a.call("mempalace_diary_write",
                              {"agent_name": "agent-a", "entry": "A holds the lease"}))["success"]
        lock = lock_file_for(str(palace), str(a.home))
        assert lock.read_bytes() == b"\x00" + f"{a.pid} {fake_argv(palace)}".encode()

        for tool, args in (
            ("mempalace_diary_write", {"agent_name": "agent-b", "entry": "B tries"}),
            ("mempalace_add_drawer", {"wing": "w", "room": "r", "content": "B drawer"}),
            ("mempalace_mine", {"source": str(tmp_path)}),
            ("mempalace_checkpoint", {"items": []}),
        ):
            assert_refused(b.call(tool, args), tool, palace, a.pid, fake_argv(palace))

        # reads and lease-exempt writes keep working on the loser
        assert payload(b.call("mempalace_kg_add", {"subject": "b", "predicate": "p",
                                                   "object": "o"}))["success"] is True
        assert payload(b.call("mempalace_event_append", {
            "type": "note", "stream": "s", "room": "r", "from_agent": "agent-b"}))["success"]
        diary = payload(b.call("mempalace_diary_read", {"agent_name": "agent-a"}))
        assert [e["content"] for e in diary["entries"]] == ["A holds the lease"]
        assert payload(b.call("mempalace_search", {"query": "lease"}))["results"]

        kill_group(a.proc)
        a.wait()
        assert lock.exists()  # the file and its stale text outlive the holder
        assert lock.read_bytes().startswith(b"\x00" + str(a.pid).encode())
        after = payload(b.call("mempalace_diary_write",
                               {"agent_name": "agent-b", "entry": "B after A died"}))
        assert after["success"] is True
        assert lock.read_bytes().startswith(b"\x00" + str(b.pid).encode())

        with FakeProcess(tmp_path / "c", name="C", home=a.home, palace=palace,
                         journal=a.journal_path) as c:
            reply = c.call("mempalace_diary_write", {"agent_name": "c", "entry": "C tries"})
            assert_refused(reply, "mempalace_diary_write", palace, b.pid, fake_argv(palace))

    events = [(r["pid"], r["event"]) for r in a.records("lease")]
    assert (a.pid, "acquired") in events and (b.pid, "contended") in events
    assert (b.pid, "acquired") in events


def test_reads_never_take_the_lease(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    with a, b:
        for fake in (a, b):  # both only read and use lease-exempt tools: nobody is refused
            fake.call("mempalace_status")
            fake.call("mempalace_kg_add", {"subject": "x", "predicate": "y", "object": "z"})
        assert not a.records("lease")
        assert payload(b.call("mempalace_diary_write",
                              {"agent_name": "b", "entry": "first"}))["success"] is True
        assert a.call("mempalace_diary_write", {"agent_name": "a", "entry": "x"})["error"][
            "data"]["reason"] == holder_reason(a.palace, b.pid, fake_argv(a.palace))


def test_clean_exit_releases_the_lease_at_once(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    with a, b:
        a.call("mempalace_diary_write", {"agent_name": "a", "entry": "x"})
        assert b.call("mempalace_diary_write", {"agent_name": "b", "entry": "y"})["error"]
        a.signal(signal.SIGTERM)
        assert a.wait() == 0
        assert payload(b.call("mempalace_diary_write",
                              {"agent_name": "b", "entry": "y"}))["success"] is True


def test_different_homes_do_not_contend(tmp_path: Path) -> None:
    palace = tmp_path / "palace"
    with FakeProcess(tmp_path / "a", palace=palace) as a, \
            FakeProcess(tmp_path / "b", palace=palace) as b:
        for fake in (a, b):
            assert payload(fake.call("mempalace_diary_write",
                                     {"agent_name": "x", "entry": "y"}))["success"] is True


def test_lock_setup_failure_is_initialization_failed(tmp_path: Path) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("not a directory")
    with FakeProcess(tmp_path, home=home) as fake:
        reply = fake.call("mempalace_diary_write", {"agent_name": "a", "entry": "x"})
        error = reply["error"]
        assert error["code"] == -32001
        assert error["message"] == ("MCP writer initialization failed; this server is read-only "
                                    "for mutating tools")
        assert error["data"]["failure_kind"] == "initialization_failed"
        assert payload(fake.call("mempalace_kg_stats")) is not None


def start_hold_lock(tmp_path: Path, home: Path, palace: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [str(PALACE_CONFORMANCE), "fake", "hold-lock", "--palace", str(palace)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(home),
        start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("holding ") and f"as PID {proc.pid}" in line, line
    return proc


def test_hold_lock_is_a_holder_and_a_contender(tmp_path: Path) -> None:
    home, palace = tmp_path / "home", tmp_path / "palace"
    palace.mkdir()
    holder = start_hold_lock(tmp_path, home, palace)
    try:
        with FakeProcess(tmp_path, home=home, palace=palace) as fake:
            reply = fake.call("mempalace_diary_write", {"agent_name": "a", "entry": "x"})
            reason = reply["error"]["data"]["reason"]
            assert f"is held by PID {holder.pid} (" in reason
            assert "hold-lock" in reason.split("(", 1)[1] or "palace-conformance" in reason
            # a second hold-lock is refused like the mempalace CLI, exit 1
            second = run_cli(["fake", "hold-lock", "--palace", str(palace)], home)
            assert second.returncode == 1 and second.stdout == ""
            assert second.stderr.startswith(f"mempalace: palace {palace} is held by PID "
                                            f"{holder.pid} (")
            holder.send_signal(signal.SIGTERM)
            holder.wait(PROMPT)
            assert payload(fake.call("mempalace_diary_write",
                                     {"agent_name": "a", "entry": "x"}))["success"] is True
    finally:
        kill_group(holder)
        holder.wait(PROMPT)


def test_cli_mine_refuses_while_a_server_holds_the_palace(tmp_path: Path) -> None:
    source = tmp_path / "minedir"
    source.mkdir()
    (source / "notes.md").write_text("mined words")
    with FakeProcess(tmp_path, state=tmp_path / "state.json") as fake:
        fake.call("mempalace_diary_write", {"agent_name": "a", "entry": "holds"})
        result = run_cli(["fake", "cli-mine", str(source), "--palace", str(fake.palace)],
                         fake.home, PALACE_FAKE_JOURNAL=str(fake.journal_path),
                         PALACE_FAKE_STATE=str(tmp_path / "state.json"))
        assert result.returncode == 1
        assert result.stdout == ""
        assert result.stderr == (f"mempalace: palace {fake.palace} is held by PID {fake.pid} "
                                 f"({fake_argv(fake.palace)}); wait for it to finish or stop the "
                                 "holder before retrying\n")
        runs = fake.records("cli_run")
        assert [(r["command"], r["exit_code"]) for r in runs] == [("mine", 1)]
        assert runs[0]["stderr"] == result.stderr.rstrip("\n")
        fake.close_stdin()
        assert fake.wait() == 0

    # with no holder the same command mines into the shared palace
    result = run_cli(["fake", "cli-mine", str(source), "--palace", str(fake.palace)],
                     fake.home, PALACE_FAKE_JOURNAL=str(fake.journal_path),
                     PALACE_FAKE_STATE=str(tmp_path / "state.json"))
    assert result.returncode == 0, result.stderr
    assert "1 new drawer" in result.stdout
    assert [r["exit_code"] for r in fake.records("cli_run")] == [1, 0]
    with FakeProcess(tmp_path / "again", home=fake.home, palace=fake.palace,
                     state=tmp_path / "state.json") as again:
        assert payload(again.call("mempalace_search", {"query": "mined"}))["results"]


def test_cli_mine_is_refused_while_hold_lock_holds(tmp_path: Path) -> None:
    home, palace = tmp_path / "home", tmp_path / "palace"
    palace.mkdir()
    holder = start_hold_lock(tmp_path, home, palace)
    try:
        result = run_cli(["fake", "cli-mine", str(tmp_path), "--palace", str(palace)], home)
        assert result.returncode == 1
        assert f"is held by PID {holder.pid} (" in result.stderr
    finally:
        kill_group(holder)
        holder.wait(PROMPT)
    assert os.path.exists(lock_file_for(str(palace), str(home)))
