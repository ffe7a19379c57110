"""Stopping a run (Ctrl-C, or SIGTERM from a CI timeout) says so in one line, exits 128 plus the
signal (143 for SIGTERM) and leaves no process behind: not the hosts, not the fakes, not the warm
server. A reader that goes away (``| head``) ends a listing quietly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from palace_conformance.runner.execution.world import scrubbed_environ


def _processes_marked(marker: str) -> list[int]:
    """Live processes whose environment carries ``marker`` (every process of the run does)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in environ.split(b"\0") and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def _in_flight(pids: list[int]) -> bool:
    """At least three processes, one of them the fake palace child of a bridge."""
    def command_line(pid: int) -> bytes:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return b""

    return len(pids) >= 3 and any(b"/mempalace-mcp" in command_line(pid) for pid in pids)


def test_sigterm_stops_the_run_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    marker = f"TMPDIR={tmp_path}"
    env = scrubbed_environ()
    env.update(HOME=str(tmp_path), TMPDIR=str(tmp_path))  # every world lives under tmp_path
    runner = subprocess.Popen(
        [sys.executable, "-c", "from palace_conformance.cli import main; main()", "run",
         "--jobs", "2", "--select", "feed.*", "--select", "stdio.*"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    # the runner, the warm server, a host, and a palace child a bridge started: a run is in
    # flight, with processes of every kind to clean up
    while not _in_flight(_processes_marked(marker)):
        assert runner.poll() is None and time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 143, (out[-1000:], err[-1000:])
    assert err.strip().splitlines()[-1] == (
        "palace-conformance run: interrupted: the runs in flight finished and were cleaned up; "
        "no report written")
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while (left := _processes_marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, [Path(f"/proc/{pid}/cmdline").read_bytes()[:200] for pid in left]


def test_a_closed_pipe_ends_a_listing_quietly(tmp_path: Path) -> None:
    """``palace-conformance fixtures list | head -1``: the reader went away, which is no error."""
    listing = subprocess.Popen(
        [sys.executable, "-c", "from palace_conformance.cli import main; main()", "fixtures",
         "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert listing.stdout is not None and listing.stderr is not None
    # closed before the interpreter is even up, so its first write meets a closed pipe (the
    # whole listing would fit in the pipe's buffer, so a reader that closes later proves nothing)
    listing.stdout.close()
    err = listing.stderr.read().decode()
    assert listing.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err, err
