"""The stdio relay of a real-server world journals in the fake's format (a stand-in server here:
no real mempalace needed)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake.journal import read_journal
from palace_conformance.real.journal_relay import recv_fields, send_fields
from palace_conformance.relay.zygote import server_environment

#: answers every request line with an empty result, exits 0 on EOF and 3 on SIGTERM
STAND_IN = """
import json, os, signal, sys
signal.signal(signal.SIGTERM, lambda *a: os._exit(3))
for line in sys.stdin:
    message = json.loads(line)
    if "id" in message:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                     "result": {"env": os.environ.get("MEMPALACE_PALACE_PATH")}})
                         + "\\n")
        sys.stdout.flush()
"""


def _relay(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    journal = tmp_path / "journal.jsonl"
    config = tmp_path / "relay.json"
    config.write_text(json.dumps({"journal": str(journal), "palace": str(tmp_path / "palace"),
                                  "command": [sys.executable, "-c", STAND_IN],
                                  "env": {"MEMPALACE_HUB_FORWARD": "0"}}))
    code = ("from palace_conformance.real.journal_relay import main; "
            f"main({str(config)!r})")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, cwd=tmp_path)
    return proc, journal


def _ask(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


def test_lines_go_through_and_are_journaled_as_the_fake_does(tmp_path: Path) -> None:
    proc, journal = _relay(tmp_path)
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "mempalace_status", "arguments": {}}}
    answer = _ask(proc, call)
    assert answer["id"] == 7 and answer["result"]["env"] == str(tmp_path / "palace")
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(20) == 0
    records = read_journal(journal)
    kinds = [r["kind"] for r in records]
    assert kinds == ["process_start", "recv", "send", "process_exit"]
    assert all(r["pid"] == proc.pid and r["transport"] == "stdio" for r in records)
    assert (records[1]["method"], records[1]["tool"], records[1]["id"]) == (
        "tools/call", "mempalace_status", 7)
    assert records[2]["message"] == answer and records[2]["id"] == 7
    assert (records[3]["code"], records[3]["reason"]) == (0, "stdin EOF")
    assert proc.stdout is not None
    proc.stdout.close()


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/stat is Linux's")
def test_process_start_carries_the_relays_creation(tmp_path: Path) -> None:
    """The relay is the child the bridge spawned: a gap to its start is the spawn, not its
    interpreter's start (``created_t``, as the fake journals it)."""
    before = time.monotonic()
    proc, journal = _relay(tmp_path)
    _ask(proc, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    [start] = [r for r in read_journal(journal) if r["kind"] == "process_start"]
    assert before <= start["created_t"] <= start["t"]
    for stream in (proc.stdin, proc.stdout):
        assert stream is not None
        stream.close()
    assert proc.wait(20) == 0


def test_a_signal_is_journaled_and_passed_on(tmp_path: Path) -> None:
    proc, journal = _relay(tmp_path)
    _ask(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 3  # the server's own exit code, as a bridge would see it
    records = read_journal(journal)
    assert [r["kind"] for r in records][-2:] == ["signal", "process_exit"]
    assert records[-2]["signal"] == "SIGTERM"
    assert (records[-1]["code"], records[-1]["reason"]) == (3, "SIGTERM")
    for stream in (proc.stdin, proc.stdout):
        assert stream is not None
        stream.close()


def test_fields_of_odd_lines() -> None:
    assert recv_fields(b"not json\n") == {"raw": "not json", "method": None}
    assert recv_fields(b"[1]\n") == {"message": [1], "method": None}
    assert recv_fields(b'{"jsonrpc": "2.0", "id": 1, "result": {}}\n')["response"] is True
    assert recv_fields(b'{"method": "ping", "id": "a"}\n') == {
        "message": {"method": "ping", "id": "a"}, "method": "ping", "tool": None, "id": "a"}
    assert send_fields(b"oops\n")["raw"] == "oops"
    assert send_fields(b'{"id": 2, "result": {}}\n')["id"] == 2


def test_the_servers_environment_keeps_the_kit_out(tmp_path: Path) -> None:
    env = server_environment({"palace": "/p", "env": {"MEMPALACE_HUB_FORWARD": "0"}},
                             {"PYTHONPATH": "/kit", "HOME": "/h", "MEMPALACE_PALACE_PATH": "/own"})
    assert env == {"HOME": "/h", "MEMPALACE_PALACE_PATH": "/own", "MEMPALACE_HUB_FORWARD": "0"}
    assert server_environment({"palace": "/p"}, {})["MEMPALACE_PALACE_PATH"] == "/p"
