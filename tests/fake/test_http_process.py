"""The ``fake http`` process: binding, readiness, the writer lease, start-up faults, SIGTERM."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .http_support import LAUNCH, Fake, fake_env, launch, ping, start_fake


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fake]:
    server = start_fake(tmp_path_factory.mktemp("http-process"))
    yield server
    server.stop()


def run_cli(home: Path, *args: str, env: dict[str, str] | None = None,
            timeout: float = 20) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-c", LAUNCH, "fake", *args], capture_output=True,
                          text=True, env=fake_env(home, env), timeout=timeout, check=False)


def test_a_non_loopback_host_is_refused_in_one_line(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "http", "--host", "0.0.0.0")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "non-loopback host '0.0.0.0'" in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_refused_in_one_line(tmp_path: Path, port: str) -> None:
    done = run_cli(tmp_path, "http", "--port", port)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{port!r} is not a port: give 0-65535" in lines[0], lines
    assert "Traceback" not in done.stderr


def test_ready_file_and_stderr_name_the_url_of_a_free_port(fake: Fake) -> None:
    ready = fake.journal_path.parent / "ready.json"
    info = json.loads(ready.read_text())
    assert info == {"url": f"http://127.0.0.1:{fake.port}/mcp", "port": fake.port,
                    "pid": fake.proc.pid}
    assert fake.port > 0
    assert f"listening on {info['url']}" in fake.stderr()
    assert fake.http.get(f"{fake.base}/healthz").status_code == 200


def test_sigterm_exits_0_and_is_journaled(tmp_path: Path) -> None:
    fake = start_fake(tmp_path)
    fake.post(ping())
    assert fake.stop() == 0
    records = fake.records()
    assert (records[-1]["kind"], records[-1]["reason"], records[-1]["code"]) == (
        "process_exit", "SIGTERM", 0)
    assert {"kind": "signal", "signal": "SIGTERM", "action": "exit"}.items() <= records[-2].items()


def test_sigterm_while_a_peer_is_still_open_stops_without_a_traceback(tmp_path: Path) -> None:
    """The fake waits a moment for a peer to close after answering; a stop then cancels that
    wait, which Python 3.11 printed as a traceback (seen in CI at the end of the HTTP fuzz)."""
    fake = start_fake(tmp_path)
    with socket.create_connection(("127.0.0.1", fake.port), timeout=10) as peer:
        peer.sendall(b"GARBAGE\r\n\r\n")
        answer = b""
        while chunk := peer.recv(4096):  # the fake's FIN: it now waits for ours
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 400")
        assert fake.stop() == 0
    assert "Traceback" not in fake.stderr(), fake.stderr()[-2000:]


def test_the_server_holds_the_writer_lease_from_start_up(fake: Fake) -> None:
    held = run_cli(fake.home, "hold-lock", "--seconds", "0.1")
    assert held.returncode == 1
    assert f"is held by PID {fake.proc.pid}" in held.stderr
    assert [r["event"] for r in fake.records("lease")] == ["acquired"]


def test_a_held_lease_refuses_start_up_with_exit_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", LAUNCH, "fake", "hold-lock"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=fake_env(home), text=True)
    try:
        assert holder.stdout is not None and "holding" in holder.stdout.readline()
        started = time.monotonic()
        proc = launch(tmp_path, "--port", "0", home=home,
                      env={"MEMPALACE_MCP_WRITER_WAIT_SECONDS": "0.6"})
        assert proc.wait(20) == 2
        assert time.monotonic() - started >= 0.5
        stderr = (tmp_path / "stderr.txt").read_text()
        assert "Writable MCP HTTP startup is waiting up to 0.6 s for the writer lease" in stderr
        assert ("Writable MCP HTTP startup refused: another mempalace writer already holds "
                "the palace lock") in stderr
        assert f"is held by PID {holder.pid}" in stderr
        assert "Traceback" not in stderr
    finally:
        holder.kill()
        holder.wait(5)


def test_a_startup_fault_fails_the_start(tmp_path: Path) -> None:
    proc = launch(tmp_path, "--port", "0", "--fault",
                  "startup_fail@$startup,code=3,stderr=palace exploded")
    assert proc.wait(20) == 3
    assert "palace exploded" in (tmp_path / "stderr.txt").read_text()


def test_a_bad_fault_spec_is_a_one_line_error(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "http", "--fault", "explode@ping")
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "explode" in done.stderr


def test_a_busy_port_is_a_one_line_error(fake: Fake, tmp_path: Path) -> None:
    done = run_cli(tmp_path / "other-home", "http", "--port", str(fake.port))
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{fake.port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_stderr_shows_the_peer_sync_line_and_each_error_the_way_3_11_logs_it(
        tmp_path: Path) -> None:
    """mempalace 3.11's stderr (seen by palace-conformance fidelity): its peer sync thread's
    start-up line before "listening", and per refused request the reason, the stdlib's
    ``code N, message M`` line, then the access line."""
    fake = start_fake(tmp_path, "--token", "t0ken")
    try:
        fake.post(ping())
        fake.http.get(f"{fake.base}/nope")
        lines = fake.stderr().splitlines()
    finally:
        fake.stop()
    start = lines.index("MemPalace MCP HTTP server starting...")
    assert lines[start + 1] == "peer sync thread started (interval 15s)"
    assert lines[start + 2].startswith("MemPalace MCP HTTP server listening on ")
    refused = lines.index("HTTP request rejected: missing/invalid bearer token")
    assert lines[refused + 1:refused + 3] == ['HTTP 127.0.0.1 - code 401, message Unauthorized',
                                              'HTTP 127.0.0.1 - "POST /mcp HTTP/1.1" 401 -']
    missing = lines.index("HTTP 127.0.0.1 - code 404, message Not Found")
    assert lines[missing + 1] == 'HTTP 127.0.0.1 - "GET /nope HTTP/1.1" 404 -'


def test_no_peer_sync_line_when_the_interval_is_0(tmp_path: Path) -> None:
    fake = start_fake(tmp_path, env={"MEMPALACE_SYNC_INTERVAL": "0"})
    try:
        assert "listening on" in fake.stderr() and "peer sync" not in fake.stderr()
    finally:
        fake.stop()


def test_a_body_that_is_not_json_is_logged_in_the_http_wording(tmp_path: Path) -> None:
    """3.11's HTTP handler logs ``HTTP JSON-RPC read or parse error: <decoder message>`` (not
    stdio's ``Server error: ...``), and a chunked body reads as an empty one."""
    fake = start_fake(tmp_path)
    try:
        assert fake.post(b"{bad").status_code == 400
        chunked = fake.http.post(fake.url, content=iter([b"{}"]),
                                 headers={"Content-Type": "application/json"})
        assert chunked.status_code == 400
        lines = fake.stderr().splitlines()
    finally:
        fake.stop()
    assert ("HTTP JSON-RPC read or parse error: Expecting property name enclosed in double "
            "quotes: line 1 column 2 (char 1)") in lines
    assert "HTTP JSON-RPC read or parse error: Expecting value: line 1 column 1 (char 0)" in lines
    assert not [line for line in lines if line.startswith("Server error")]
