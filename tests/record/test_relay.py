"""The recorder as a process: lines pass both ways unchanged, either side ending ends the other
(the server's whole process group), and bad input is one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from palace_conformance.processes import alive

RECORD = [str(Path(sys.executable).parent / "palace-conformance"), "record"]

#: a server that echoes each line as a JSON-RPC answer, writes its pid (and its grandchild's)
#: to a file, and exits on EOF unless told to linger and shrug off SIGTERM
SERVER = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    pids = [os.getpid()]
    if "--stubborn" in sys.argv:  # before the pids are out: the test acts on them at once
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--grandchild" in sys.argv:
        pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]).pid)
    with open(sys.argv[1] + ".part", "w") as f:  # whole or absent: the test polls for it
        f.write(json.dumps(pids))
    os.replace(sys.argv[1] + ".part", sys.argv[1])
    for line in sys.stdin:
        if line.strip() == "quit":
            sys.exit(3)
        try:
            request = json.loads(line)
        except ValueError:
            print("not json: " + line.strip(), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": {
            "content": [{"type": "text", "text": json.dumps({"echo": request.get("params")})}]}}),
            flush=True)
    if "--stubborn" in sys.argv:
        time.sleep(600)
""")


def start(tmp_path: Path, *server_flags: str, grace_ms: int = 300) -> tuple[subprocess.Popen[str],
                                                                          Path, Path]:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    pids = tmp_path / "pids.json"
    out = tmp_path / "tool.recorded.case.json"
    proc = subprocess.Popen([*RECORD, "--out", str(out), "--grace-ms", str(grace_ms), "--",
                             sys.executable, str(script), str(pids), *server_flags],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    return proc, pids, out


def server_pids(pids: Path) -> list[int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if pids.exists() and pids.read_text():
            return list(json.loads(pids.read_text()))
        time.sleep(0.02)
    raise AssertionError("the server never started")


def gone(pids: list[int], seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.02)
    return False


def test_lines_pass_unchanged_and_calls_are_recorded(tmp_path: Path) -> None:
    proc, pids, out = start(tmp_path)
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "mempalace_status", "arguments": {"n": 1}}}
    stdout, _ = proc.communicate(json.dumps(request) + "\nplain words\n", timeout=60)
    assert proc.returncode == 0
    first, second = stdout.splitlines()
    assert json.loads(first)["id"] == 1
    assert second == "not json: plain words"
    draft = json.loads(out.read_text())
    step = draft["steps"][3]
    assert step["name"] == "mempalace_status" and step["args"] == {"n": 1}
    assert step["expect"]["result"]["json"] == {
        "echo": {"name": "mempalace_status", "arguments": {"n": 1}}}
    assert gone(server_pids(pids))


def test_a_server_that_ignores_eof_and_sigterm_is_killed_with_its_group(tmp_path: Path) -> None:
    proc, pids, out = start(tmp_path, "--stubborn", "--grandchild")
    group = server_pids(pids)
    assert len(group) == 2
    proc.stdin.close()  # the bridge goes away
    # bounded: the relay ends on its own, with the status of the SIGKILL the server needed
    assert proc.wait(timeout=60) == 128 + signal.SIGKILL
    assert gone(group), "the server or its grandchild outlived the recorder"
    assert json.loads(out.read_text())["id"] == "tool.recorded.case"


def test_a_server_that_exits_ends_the_recorder_with_its_status(tmp_path: Path) -> None:
    proc, pids, _out = start(tmp_path)
    server_pids(pids)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("quit\n")
    proc.stdin.flush()  # stdin stays open: the bridge is still there
    assert proc.wait(timeout=60) == 3
    assert proc.stdout.read() == ""


def test_sigterm_ends_the_server_group_and_leaves_the_draft(tmp_path: Path) -> None:
    proc, pids, out = start(tmp_path, "--grandchild")
    group = server_pids(pids)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert gone(group)
    assert out.exists()


def run_record(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> (
        subprocess.CompletedProcess[str]):
    return subprocess.run([*RECORD, *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})})


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    cases = [
        (["--out", "my draft.json", "--", "true"], "is not a scenario id"),
        (["--out", "record.x.json", "--", "true"], "unknown area 'record'"),
        (["--out", "tool.x.json", "--", "no-such-palace-program"], "cannot start the palace"),
        (["--out", "nowhere/tool.x.json", "--", "true"], "no such directory"),
        (["--out", "tool.x.json", "--grace-ms", "-1", "--", "true"], "--grace-ms"),
    ]
    for args, wanted in cases:
        done = run_record(tmp_path, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert wanted in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "tool.x.json").exists()  # nothing ran: no draft
    nested = run_record(tmp_path, "--out", "tool.x.json", "--", "true",
                        env={"PALACE_CONFORMANCE_RECORDING": "1"})
    assert nested.returncode == 2 and "another recorder" in nested.stderr
