"""Every fault primitive, over stdio: it fires on the request it targets, and only there.

Each test sends traffic around the targeted request and checks the neighbours are untouched, and
reads the journal's ``fault`` records to see which message fired it.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from .stdio_harness import FakeProcess, payload, rpc, wait_for


def fired(fake: FakeProcess) -> list[tuple[str, str | None, int]]:
    """(action, method or tool, occurrence) of every fault the journal recorded."""
    return [(r["action"], r.get("tool") or r.get("method"), r["occurrence"])
            for r in fake.records("fault")]


def search(query: str = "x") -> dict[str, Any]:
    return {"name": "mempalace_search", "arguments": {"query": query}}


# -- stalls and delays -----------------------------------------------------------------------


def test_stall_forever_blocks_that_request_and_everything_behind_it(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["stall@mempalace_search"]) as fake:
        fake.ping()
        fake.call("mempalace_status")  # another tool: untouched
        fake.send(rpc("tools/call", search(), 7))
        fake.send(rpc("ping", None, 8))  # stdio is sequential: this waits behind the stall
        fake.assert_silent(0.8)
        assert fired(fake) == [("stall", "mempalace_search", 1)]
        fake.signal(signal.SIGTERM)
        assert fake.wait() == 0


def test_stall_for_ms_drops_the_request_then_serves_the_next(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["stall@ping#2,ms=400"]) as fake:
        fake.ping()
        sent = time.monotonic()
        fake.send(rpc("ping", None, "stalled"))
        fake.send(rpc("ping", None, "next"))
        when, reply = fake.recv_timed()
        assert reply["id"] == "next"  # the stalled one is never answered
        assert when - sent >= 0.4
        fake.ping()
        fake.assert_silent(0.2)
        assert fired(fake) == [("stall", "ping", 2)]
        assert fake.records("stall_end")[0]["id"] == "stalled"


def test_delay_answers_late_but_answers(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["delay@mempalace_status,ms=500"]) as fake:
        fake.ping()
        sent = time.monotonic()
        reply = fake.call("mempalace_status")
        assert time.monotonic() - sent >= 0.5
        assert payload(reply)["total_drawers"] == 0
        fake.call("mempalace_status")  # times defaults to 1: the next one is not delayed
        assert fired(fake) == [("delay", "mempalace_status", 1)]


def test_a_delayed_request_delays_the_next_one(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["delay@tools/call,ms=400"]) as fake:
        sent = time.monotonic()
        fake.send(rpc("tools/call", {"name": "mempalace_kg_stats", "arguments": {}}, 1))
        fake.send(rpc("ping", None, 2))
        (t1, r1), (t2, r2) = fake.recv_timed(), fake.recv_timed()
        assert (r1["id"], r2["id"]) == (1, 2)
        assert t2 - sent >= 0.4 and t2 >= t1


def test_delay_at_startup_slows_the_first_answer(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["delay@$startup,ms=500"]) as fake:
        fake.ping()
        assert time.monotonic() - fake.started >= 0.5


# -- progress ------------------------------------------------------------------------------


def test_drip_progress_uses_the_request_progress_token(tmp_path: Path) -> None:
    faults = ["drip_progress@mempalace_status,interval_ms=50,count=3"]
    with FakeProcess(tmp_path, faults=faults) as fake:
        fake.ping()
        fake.send(rpc("tools/call", {"name": "mempalace_status", "arguments": {},
                                     "_meta": {"progressToken": "tok-9"}}, 4))
        notes = [fake.recv() for _ in range(3)]
        assert [n["params"] for n in notes] == [
            {"progressToken": "tok-9", "progress": step, "total": 3} for step in (1, 2, 3)]
        assert all(n["method"] == "notifications/progress" and "id" not in n for n in notes)
        assert fake.recv()["id"] == 4
        fake.send(rpc("tools/call", {"name": "mempalace_status", "arguments": {},
                                     "_meta": {"progressToken": "tok-10"}}, 5))
        assert fake.recv()["id"] == 5  # fired once only


def test_drip_progress_then_stall_never_answers(tmp_path: Path) -> None:
    faults = ["drip_progress@ping,interval_ms=30,count=2,then=stall"]
    with FakeProcess(tmp_path, faults=faults) as fake:
        fake.send(rpc("ping", {"_meta": {"progressToken": 77}}, 1))
        assert [fake.recv()["params"]["progressToken"] for _ in range(2)] == [77, 77]
        fake.assert_silent(0.5)


# -- exits -------------------------------------------------------------------------------------


def test_exit_before_reply_with_code(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["exit@mempalace_status,code=75"]) as fake:
        fake.ping()
        fake.send(rpc("tools/call", {"name": "mempalace_status", "arguments": {}}, 2))
        assert fake.finish() == 75
        assert fake.lines.empty()
        assert fake.records("process_exit")[-1]["code"] == 75
        assert fired(fake) == [("exit", "mempalace_status", 1)]


def test_exit_after_reply_with_code(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["exit@ping#2,code=3,when=after_reply"]) as fake:
        fake.ping()
        fake.send(rpc("ping", None, "last"))
        assert fake.recv()["id"] == "last"
        assert fake.wait() == 3


def test_exit_leaves_its_last_words_in_the_stderr_pipe(tmp_path: Path) -> None:
    """``stderr_bytes`` + ``stderr``: the whole burst and the last line are written before the
    exit without anyone reading them (the pipe is enlarged), so they are still in the pipe when
    the process is gone, last line last."""
    import subprocess

    from .stdio_harness import FAKE_MCP, clean_env

    if int(Path("/proc/sys/fs/pipe-max-size").read_text()) < 400_000:
        pytest.skip("this system's pipes cannot hold the burst")
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen(
        [str(FAKE_MCP), "--palace", str(tmp_path / "palace")], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(
            home, PALACE_FAKE_JOURNAL=str(tmp_path / "journal.jsonl"),
            PALACE_FAKE_FAULT="exit@ping,code=9,stderr_bytes=300000,stderr=LAST WORDS 42"))
    assert proc.stdin is not None and proc.stderr is not None
    try:
        proc.stdin.write(json.dumps(rpc("ping", None, 1)).encode() + b"\n")
        proc.stdin.flush()
        assert proc.wait(10) == 9  # nobody read stderr, yet the child could exit
        text = proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()
    assert len(text) > 300_000
    assert text.endswith("\nLAST WORDS 42\n") and text.count("LAST WORDS 42") == 1


def test_exit_without_last_words_writes_no_burst(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["exit@ping,code=4"]) as fake:
        fake.send(rpc("ping", None, 1))
        assert fake.finish() == 4
        assert "stderr flood" not in fake.stderr_text()


def test_startup_fail_counts_starts_across_processes(tmp_path: Path) -> None:
    """'Fail the first two starts, then work': three processes share one journal."""
    journal = tmp_path / "journal.jsonl"
    spec = "startup_fail@$startupx2,code=7,stderr=mempalace: palace is held by PID 42"
    codes = []
    for attempt in range(2):
        with FakeProcess(tmp_path / f"run{attempt}", faults=[spec], journal=journal) as fake:
            codes.append(fake.wait())
            # the reader thread may drain stderr a moment after the exit: wait for it, bounded
            assert "mempalace: palace is held by PID 42" in fake.wait_stderr(
                "mempalace: palace is held by PID 42")
            assert fake.lines.empty()
    assert codes == [7, 7]
    with FakeProcess(tmp_path / "run2", faults=[spec], journal=journal) as fake:
        assert fake.request("initialize", {})["result"]["serverInfo"]["name"] == "mempalace"
        assert [f[2] for f in fired(fake)] == [1, 2]


def test_ignore_sigterm_needs_sigkill(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["ignore_sigterm@$startup"]) as fake:
        fake.ping()
        fake.signal(signal.SIGTERM)
        wait_for(lambda: fake.records("signal"), what="the SIGTERM record")
        time.sleep(0.3)
        assert fake.alive()
        fake.ping()
        assert fake.records("signal") == [
            {**fake.records("signal")[0], "signal": "SIGTERM", "action": "ignored"}]
        fake.signal(signal.SIGKILL)
        assert fake.wait() == -signal.SIGKILL


# -- noise on the pipes --------------------------------------------------------------------------


def test_flood_stderr_reaches_a_draining_reader_and_the_reply_still_comes(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["flood_stderr@ping#2,bytes=400000"]) as fake:
        fake.ping()
        before = len(fake.stderr)
        fake.ping()  # the flood is written, blocking, before the reply
        wait_for(lambda: len(fake.stderr) - before >= 400000, what="the flood on stderr")
        assert fake.stderr_text().count("fake palace stderr flood") >= 400000 // 80
        fake.ping()
        assert fired(fake) == [("flood_stderr", "ping", 2)]


def test_flood_stderr_invalid_utf8_writes_bytes_no_decoder_accepts(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["flood_stderr@ping,bytes=2000,invalid_utf8=true"]) as fake:
        fake.ping()
        wait_for(lambda: len(fake.stderr) >= 2000, what="the flood on stderr")
        with pytest.raises(UnicodeDecodeError):
            bytes(fake.stderr).decode("utf-8")
        assert fake.stderr_text().count("fake palace stderr flood") >= 2000 // 80


def test_write_stderr_writes_its_pieces_apart_before_the_reply(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"faults": [{
        "action": "write_stderr", "on": {"method": "ping", "nth": 2},
        "pieces": ["note: key=ab", "cd and on\n"], "pause_ms": 400}]}))
    with FakeProcess(tmp_path, plan=plan) as fake:
        fake.ping()
        assert "key=ab" not in fake.stderr_text()
        began = time.monotonic()
        fake.send(rpc("ping", None, 7))
        fake.recv()  # the reply comes after both pieces, pause_ms apart (a lower bound only)
        assert time.monotonic() - began >= 0.4
        assert "note: key=abcd and on\n" in fake.wait_stderr("note: key=abcd and on\n")
        assert fired(fake) == [("write_stderr", "ping", 2)]


def test_write_stderr_at_startup_comes_before_serving(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=['write_stderr@$startup,pieces=["early words\\n"]']) as fake:
        fake.ping()  # answered only after the startup faults ran: the words were written first
        assert "early words\n" in fake.wait_stderr("early words\n")  # the harness reads apart
        assert fired(fake) == [("write_stderr", "$startup", 1)]


def test_retype_id_sends_a_decoy_with_the_other_id_type_first(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["retype_id@pingx2"]) as fake:
        fake.send(rpc("ping", None, 7))
        decoy, reply = fake.recv(), fake.recv()
        assert decoy["id"] == "7" and decoy["error"]["code"] == -32099
        assert reply == {"jsonrpc": "2.0", "id": 7, "result": {}}
        fake.send(rpc("ping", None, "8"))
        assert fake.recv()["id"] == 8
        assert fake.recv() == {"jsonrpc": "2.0", "id": "8", "result": {}}
        fake.ping()
        assert fake.sync() == []


def test_spawn_grandchild_journals_it_in_the_childs_group(tmp_path: Path) -> None:
    import os

    from palace_conformance.processes import alive

    with FakeProcess(tmp_path, faults=["spawn_grandchild@$startup,lifetime_ms=20000"]) as fake:
        fake.ping()  # answered only after the grandchild journaled its start
        [start] = fake.records("descendant_start")
        grandchild = start["pid"]
        assert start["parent"] == fake.pid and grandchild != fake.pid
        assert os.getpgid(grandchild) == os.getpgid(fake.pid)
        try:
            fake.close_stdin()
            assert fake.wait() == 0
            time.sleep(0.3)
            assert alive(grandchild)  # stdin EOF ends the child only; the group is the bridge's
        finally:
            os.killpg(fake.pid, signal.SIGKILL)
        wait_for(lambda: not alive(grandchild), what="the grandchild's end")


def test_spawn_grandchild_ignore_sigterm_outlives_a_sigterm_to_the_group(tmp_path: Path) -> None:
    """``ignore_sigterm``: a SIGTERM to the group ends the child, not the grandchild; only the
    SIGKILL sweep after it does."""
    import os

    from palace_conformance.processes import alive

    fault = "spawn_grandchild@$startup,lifetime_ms=20000,ignore_sigterm=true"
    with FakeProcess(tmp_path, faults=[fault]) as fake:
        fake.ping()
        [start] = fake.records("descendant_start")
        grandchild = start["pid"]
        assert start["ignores_sigterm"] is True
        try:
            os.killpg(fake.pid, signal.SIGTERM)
            assert fake.wait() == 0
            time.sleep(0.3)
            assert alive(grandchild)
            os.killpg(fake.pid, signal.SIGKILL)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(grandchild, signal.SIGKILL)
        wait_for(lambda: not alive(grandchild), what="the grandchild's end")


def test_spawn_grandchild_leave_group_and_hold_pipes_escapes_the_group(tmp_path: Path) -> None:
    """``leave_group`` + ``hold_pipes``: the grandchild is in a session of its own (no group
    signal reaches it), journals so, and holds the child's stdout and stderr, not its stdin."""
    import os

    from palace_conformance.processes import alive

    fault = "spawn_grandchild@$startup,lifetime_ms=20000,leave_group=true,hold_pipes=true"
    with FakeProcess(tmp_path, faults=[fault]) as fake:
        fake.ping()
        [start] = fake.records("descendant_start")
        grandchild = start["pid"]
        assert start["left_group"] is True and start["holds_pipes"] is True
        try:
            assert os.getsid(grandchild) == os.getpgid(grandchild) == grandchild
            assert os.getpgid(grandchild) != os.getpgid(fake.pid)
            assert fake.proc.stdout is not None and fake.proc.stderr is not None
            held = {fd: os.readlink(f"/proc/{grandchild}/fd/{fd}") for fd in (0, 1, 2)}
            assert held[0] == os.devnull
            assert held[1] == f"pipe:[{os.fstat(fake.proc.stdout.fileno()).st_ino}]"
            assert held[2] == f"pipe:[{os.fstat(fake.proc.stderr.fileno()).st_ino}]"
            fake.close_stdin()
            assert fake.wait() == 0
            with contextlib.suppress(ProcessLookupError):  # the group may be empty by now
                os.killpg(fake.pid, signal.SIGKILL)  # the bridge's group kill misses it
            time.sleep(0.3)
            assert alive(grandchild)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(grandchild, signal.SIGKILL)
        wait_for(lambda: not alive(grandchild), what="the grandchild's end")


def test_spawn_grandchild_last_words_come_when_the_group_is_swept(tmp_path: Path) -> None:
    """``last_words``: a tripwire grandchild stays in the group; the escaped one writes its line
    on the child's stderr only when a signal to the group ends the tripwire, not at the child's
    exit, then exits (and so lets go of the child's pipes)."""
    import os

    from palace_conformance.processes import alive

    fault = ("spawn_grandchild@$startup,lifetime_ms=20000,leave_group=true,hold_pipes=true,"
             "last_words=helper going down")
    with FakeProcess(tmp_path, faults=[fault]) as fake:
        fake.ping()
        starts = fake.records("descendant_start")
        [escaped] = [r for r in starts if r["left_group"]]
        [tripwire] = [r for r in starts if not r["left_group"]]
        assert escaped["last_words"] == "helper going down" and "last_words" not in tripwire
        assert os.getpgid(tripwire["pid"]) == fake.pid
        try:
            fake.close_stdin()
            assert fake.wait() == 0
            time.sleep(0.3)
            assert "helper going down" not in fake.stderr_text()  # the child's exit: not yet
            os.killpg(fake.pid, signal.SIGKILL)  # the sweep: the tripwire's end
            fake.wait_stderr("helper going down\n")
            wait_for(lambda: not alive(escaped["pid"]), what="the escaped grandchild's end")
            assert [r["reason"] for r in fake.records("descendant_exit")] == [
                "the group was swept: last words written"]
        finally:
            for pid in (escaped["pid"], tripwire["pid"]):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_spawn_grandchild_ignore_sigterm_reaches_the_escaped_one_with_last_words(
        tmp_path: Path) -> None:
    """With ``last_words`` the returned grandchild is the escaped one: ``ignore_sigterm`` is
    its, not dropped on that path (the tripwire keeps the default, so the sweep still ends it)."""
    import os

    fault = ("spawn_grandchild@$startup,lifetime_ms=20000,leave_group=true,hold_pipes=true,"
             "last_words=bye,ignore_sigterm=true")
    with FakeProcess(tmp_path, faults=[fault]) as fake:
        fake.ping()
        starts = fake.records("descendant_start")
        try:
            [escaped] = [r for r in starts if r["left_group"]]
            [tripwire] = [r for r in starts if not r["left_group"]]
            assert escaped.get("ignores_sigterm") is True and "ignores_sigterm" not in tripwire
        finally:
            for record in starts:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(record["pid"], signal.SIGKILL)


def test_spawn_grandchild_flags_must_be_booleans() -> None:
    from palace_conformance.fake.faults import FaultPlanError, fault_from_json

    for flag in ("leave_group", "hold_pipes", "ignore_sigterm"):
        with pytest.raises(FaultPlanError, match=f"'{flag}' must be true or false"):
            fault_from_json({"on": {"method": "$startup"}, "action": "spawn_grandchild",
                             flag: "yes"}, 0)
    with pytest.raises(FaultPlanError, match="'last_words' is a string, and needs leave_group"):
        fault_from_json({"on": {"method": "$startup"}, "action": "spawn_grandchild",
                         "leave_group": True, "last_words": "bye"}, 0)
    with pytest.raises(FaultPlanError, match="'stderr' must be a string"):
        fault_from_json({"on": {"method": "ping"}, "action": "exit", "stderr": 5}, 0)


def test_garbage_line_comes_before_the_reply(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["garbage@ping#2,text=NOT JSON {"]) as fake:
        fake.ping()
        fake.send(rpc("ping", None, 2))
        assert fake.recv_line() == b"NOT JSON {\n"
        assert fake.recv() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        fake.ping()
        assert fake.sync() == []
        assert fired(fake) == [("garbage", "ping", 2)]


def test_partial_line_then_exit(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["partial_line@mempalace_status,code=9"]) as fake:
        fake.send(rpc("tools/call", {"name": "mempalace_status", "arguments": {}}, 1))
        assert fake.wait() == 9
        line = fake.recv_line()  # the pump hands over the unterminated tail at EOF
        assert not line.endswith(b"\n") and line.startswith(b'{"jsonrpc": "2.0", "id": 1')
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)


def test_partial_line_then_stall(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["partial_line@ping,then=stall"]) as fake:
        fake.send(rpc("ping", None, 1))
        fake.assert_silent(0.5)  # half a line is no line
        assert fake.alive()


def test_oversized_reply(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["oversized@ping,bytes=3000000"]) as fake:
        fake.send(rpc("ping", None, 1))
        line = fake.recv_line()
        assert len(line) > 3_000_000 and line.endswith(b"\n")
        assert len(json.loads(line)["result"]["_padding"]) == 3_000_000
        assert "_padding" not in fake.request("ping")["result"]
        assert fired(fake) == [("oversized", "ping", 1)]


@pytest.mark.parametrize(("spec", "expected"), [("wrong_id@ping", "wrong-1"),
                                                ('wrong_id@ping,reply_id="1"', "1"),
                                                ("wrong_id@ping,reply_id=999", 999),
                                                ("wrong_id@ping,reply_id=null", None)])
def test_wrong_id(tmp_path: Path, spec: str, expected: Any) -> None:
    with FakeProcess(tmp_path, faults=[spec]) as fake:
        fake.send(rpc("ping", None, 1))
        assert fake.recv() == {"jsonrpc": "2.0", "id": expected, "result": {}}
        fake.ping()  # the next one carries its own id again
        assert fired(fake) == [("wrong_id", "ping", 1)]


def test_duplicate_response(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["duplicate_response@ping#2"]) as fake:
        fake.ping()
        fake.send(rpc("ping", None, "twice"))
        assert fake.recv_line() == fake.recv_line() == (
            b'{"jsonrpc": "2.0", "id": "twice", "result": {}}\n')
        fake.ping()
        fake.assert_silent(0.2)
        assert fired(fake) == [("duplicate_response", "ping", 2)]


# -- server-initiated traffic ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["ping", "sampling/createMessage"])
def test_server_request_and_the_client_reply_is_journaled(tmp_path: Path, method: str) -> None:
    spec = f"server_request@mempalace_status,method={method}"
    with FakeProcess(tmp_path, faults=[spec]) as fake:
        fake.send(rpc("tools/call", {"name": "mempalace_status", "arguments": {}}, 1))
        request = fake.recv()
        assert request["method"] == method and request["params"] == {}
        assert isinstance(request["id"], str) and request["id"].startswith("fake-srv-")
        assert fake.recv()["id"] == 1
        answer: dict[str, Any] = ({"result": {}} if method == "ping" else
                                  {"error": {"code": -32601, "message": "Method not found"}})
        fake.send({"jsonrpc": "2.0", "id": request["id"], **answer})
        fake.ping()  # the client's reply gets no answer of its own
        fake.assert_silent(0.2)
        replies = [r for r in fake.records("recv") if r.get("response")]
        assert [r["message"] for r in replies] == [
            {"jsonrpc": "2.0", "id": request["id"], **answer}]


def test_notify_sends_a_notification_before_the_reply(tmp_path: Path) -> None:
    spec = 'notify@tools/list,method=notifications/tools/list_changed,params={"why":"test"}'
    with FakeProcess(tmp_path, faults=[spec]) as fake:
        fake.send(rpc("tools/list", None, 1))
        assert fake.recv() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                               "params": {"why": "test"}}
        assert len(fake.recv()["result"]["tools"]) == 47
        fake.send(rpc("tools/list", None, 2))
        assert fake.recv()["id"] == 2  # once: no notification this time
        assert fired(fake) == [("notify", "tools/list", 1)]


# -- simulated lock, overrides ------------------------------------------------------------------


def test_lock_held_fakes_a_peer_writer_once(tmp_path: Path) -> None:
    spec = "lock_held@mempalace_diary_write,pid=4242,argv=/usr/bin/mempalace-mcp"
    with FakeProcess(tmp_path, faults=[spec]) as fake:
        refused = fake.call("mempalace_diary_write", {"agent_name": "a", "entry": "x"})
        assert refused["error"]["code"] == -32001
        assert refused["error"]["data"]["reason"].endswith(
            f"palace {fake.palace} is held by PID 4242 (/usr/bin/mempalace-mcp); wait for it "
            "to finish or stop the holder before retrying")
        assert payload(fake.call("mempalace_diary_write",
                                 {"agent_name": "a", "entry": "x"}))["success"] is True
        assert fired(fake) == [("lock_held", "mempalace_diary_write", 1)]
        assert fake.records("lease")[0]["event"] == "acquired"  # the real lease, second call


def test_error_and_result_overrides(tmp_path: Path) -> None:
    faults = ['error@mempalace_status,code=-32603,message=boom,data={"k":1}',
              'result@ping#2,result={"pong":true}']
    with FakeProcess(tmp_path, faults=faults) as fake:
        assert fake.call("mempalace_status")["error"] == {
            "code": -32603, "message": "boom", "data": {"k": 1}}
        fake.ping()
        assert fake.request("ping")["result"] == {"pong": True}
        assert "total_drawers" in payload(fake.call("mempalace_status"))
        assert fired(fake) == [("error", "mempalace_status", 1), ("result", "ping", 2)]


# -- nth, times, targets, transports ------------------------------------------------------------


def test_nth_and_times_fire_on_exactly_those_matches(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["error@ping#2x2,code=-1,message=e"]) as fake:
        outcomes = ["error" in fake.request("ping") for _ in range(5)]
        assert outcomes == [False, True, True, False, False]
        fake.call("mempalace_status")  # other methods don't count as pings
        assert fired(fake) == [("error", "ping", 2), ("error", "ping", 3)]


def test_times_forever(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["error@ping#3x*,code=-2,message=e"]) as fake:
        assert ["error" in fake.request("ping") for _ in range(6)] == [False, False] + [True] * 4


def test_any_message_target_counts_notifications_too(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, faults=["delay#3,ms=300"]) as fake:
        fake.send({"jsonrpc": "2.0", "method": "notifications/initialized"})  # 1st
        fake.ping()                                                              # 2nd
        sent = time.monotonic()
        fake.ping()                                                              # 3rd: delayed
        assert time.monotonic() - sent >= 0.3
        assert fired(fake) == [("delay", "ping", 3)]


def test_nth_counts_across_respawns(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    spec = "error@ping#2,code=-5,message=second ping ever"
    with FakeProcess(tmp_path / "one", faults=[spec], journal=journal) as first:
        first.ping()
    with FakeProcess(tmp_path / "two", faults=[spec], journal=journal) as second:
        assert second.request("ping")["error"]["message"] == "second ping ever"
        second.ping()


@pytest.mark.parametrize(("transport", "fires"), [("http", False), ("stdio", True), (None, True)])
def test_transport_filter(tmp_path: Path, transport: str | None, fires: bool) -> None:
    on: dict[str, Any] = {"method": "ping"}
    if transport:
        on["transport"] = transport
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schema_version": 1, "faults": [
        {"id": "f", "on": on, "action": "error", "code": -7, "message": "filtered"}]}))
    with FakeProcess(tmp_path, plan=plan) as fake:
        assert ("error" in fake.request("ping")) is fires
        assert len(fired(fake)) == int(fires)


def test_plan_file_and_compact_faults_add_up(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"id": "from-plan", "on": {"tool": "mempalace_status"},
                                 "action": "error", "code": -9, "message": "plan"}]))
    with FakeProcess(tmp_path, plan=plan, faults=["error@ping,code=-8,message=compact"]) as fake:
        assert fake.request("ping")["error"]["message"] == "compact"
        assert fake.call("mempalace_status")["error"]["message"] == "plan"
        assert {r["fault_id"] for r in fake.records("fault")} == {"from-plan", "cli-1-error"}
