"""The HTTP recorder as a process between the reference bridge (remote mode) and a palace over
real sockets: headers, sessions and the token pass through and stay out of the draft, an event
stream is passed on as it comes, a silent palace does not hang it, Ctrl-C keeps the draft, and
bad input is one line. The palace is the fake over HTTP, or a stub socket server where the test
must hold an answer at a chosen point."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from palace_conformance.redaction import name_looks_secret
from palace_conformance.relay.http import EventStream, relayed

BIN = Path(sys.executable).parent
TOKEN = "http-rec-t0ken-9f8e7d6c"
CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "mempalace_status", "arguments": {}}}
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 7, "progress": 1}}
REPLY = {"jsonrpc": "2.0", "id": 7, "result": {
    "content": [{"type": "text", "text": json.dumps({"total_drawers": 3})}]}}


def clean_env(**extra: str) -> dict[str, str]:
    """No kit knobs and no secret-looking variables: a token in the draft's redaction can only
    have come from the headers the recorder relayed."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_", "MEMPALACE_")) and not name_looks_secret(k)}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}"
    return {**env, **extra}


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts, each in its own group; every group is killed at the end."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def wait_for(path: Path, seconds: float = 30) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path.name} never appeared")


def start_fake(tmp_path: Path, started: list[subprocess.Popen[str]], *flags: str) -> str:
    ready = tmp_path / "palace.json"
    proc = subprocess.Popen([str(BIN / "palace-conformance"), "fake", "http", "--ready-file",
                             str(ready), "--journal", str(tmp_path / "journal.jsonl"), *flags],
                            env={**clean_env(), "HOME": str(tmp_path)}, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    started.append(proc)
    return str(json.loads(wait_for(ready))["url"])


def start_recorder(tmp_path: Path, started: list[subprocess.Popen[str]], upstream: str,
                   *flags: str) -> tuple[subprocess.Popen[str], str, Path]:
    """The recorder and the URL its one stdout line gives the bridge."""
    out = tmp_path / "tool.recorded.http-case.json"
    proc = subprocess.Popen([str(BIN / "palace-conformance"), "record", "--upstream", upstream,
                             "--out", str(out), *flags], env=clean_env(), text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    started.append(proc)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready, "the recorder printed nothing within 30 s"
    line = proc.stdout.readline()
    match = re.fullmatch(r"export MEMPALACE_REMOTE_URL=(http://127\.0\.0\.1:\d+/\S*)\n", line)
    assert match, line
    return proc, match.group(1), out


def stop(proc: subprocess.Popen[str], number: int = signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(number)
    _, stderr = proc.communicate(timeout=30)
    return proc.returncode, stderr


def bridge(url: str, *calls: tuple[str, dict[str, object]]) -> subprocess.CompletedProcess[str]:
    lines = "".join(json.dumps({"tool": t, "arguments": a}) + "\n" for t, a in calls)
    return subprocess.run([str(BIN / "palace-bridge"), "run"], input=lines, text=True,
                          capture_output=True, timeout=120,
                          env=clean_env(MEMPALACE_REMOTE_URL=url, MEMPALACE_REMOTE_TOKEN=TOKEN))


def journal(tmp_path: Path) -> list[dict[str, object]]:
    text = (tmp_path / "journal.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_headers_sessions_and_the_token_pass_through_but_stay_out_of_the_draft(
        tmp_path: Path, started: list[subprocess.Popen[str]]) -> None:
    upstream = start_fake(tmp_path, started, "--token", TOKEN, "--sessions")
    recorder, url, out = start_recorder(tmp_path, started, upstream)
    done = bridge(url, ("mempalace_add_drawer", {"wing": "w", "room": "r",
                                                 "content": f"note {TOKEN}"}),
                  ("mempalace_status", {}))
    assert done.returncode == 0, done.stderr[-2000:]
    assert [json.loads(line)["ok"] for line in done.stdout.splitlines()] == [True, True]
    assert stop(recorder)[0] == 0

    records = journal(tmp_path)
    requests = [r for r in records if r["kind"] == "http_request"]
    assert {"POST", "DELETE"} <= {r["method"] for r in requests}  # the session's end too
    headers = [r["headers"] for r in requests]
    assert all(isinstance(h, dict) and h["authorization"] == "Bearer <redacted>"
               for h in headers)
    assert any("mcp-session-id" in h and "mcp-protocol-version" in h for h in headers)
    assert all(h["host"] == upstream.split("/")[2] for h in headers)  # the palace's own Host
    sessions = [str(r["session"]) for r in records if r["kind"] == "session"]
    assert sessions

    text = out.read_text(encoding="utf-8")
    draft = json.loads(text)
    calls = [s for s in draft["steps"] if s["op"] == "call_tool"]
    assert [c["name"] for c in calls] == ["mempalace_add_drawer", "mempalace_status"]
    assert re.fullmatch(r"note <redacted-secret-\d+>", calls[0]["args"]["content"])
    assert TOKEN not in text and not any(s in text for s in sessions)


def test_an_event_stream_answer_passes_through_and_is_recorded(
        tmp_path: Path, started: list[subprocess.Popen[str]]) -> None:
    upstream = start_fake(tmp_path, started, "--fault", "sse@mempalace_status,keepalives=2")
    recorder, url, out = start_recorder(tmp_path, started, upstream)
    done = bridge(url, ("mempalace_status", {}))
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer["ok"] is True
    assert stop(recorder)[0] == 0
    responses = [r for r in journal(tmp_path) if r["kind"] == "http_response"]
    assert any("text/event-stream" in str(r["headers"]) for r in responses)  # the fault fired
    calls = [s for s in json.loads(out.read_text())["steps"] if s["op"] == "call_tool"]
    assert calls[0]["name"] == "mempalace_status"
    assert calls[0]["expect"]["ok"] is True and "json" in calls[0]["expect"]["result"]


class StubPalace:
    """A palace on a raw socket whose answer waits for :attr:`release`: ``stream`` sends the
    head and a progress event first, ``silent`` sends nothing until then."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.release = threading.Event()
        self.asked = threading.Event()  # a whole request arrived
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/mcp"
        self.done = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            data = b""
            while b"\r\n\r\n" not in data or len(data) < self._length(data):
                chunk = conn.recv(65536)  # the whole body: unread bytes would make close a RST
                if not chunk:
                    return  # the recorder's reachability probe
                data += chunk
            self.asked.set()
            if self.mode == "stream":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Connection: close\r\n\r\n"
                             + b"event: message\r\ndata: " + json.dumps(PROGRESS).encode()
                             + b"\r\n\r\n")
            self.release.wait(30)
            if self.mode == "stream":
                conn.sendall(b"data: " + json.dumps(REPLY).encode() + b"\n\n")

    @staticmethod
    def _length(data: bytes) -> int:
        """How long the request is in all, once its head is in ``data``."""
        head, _, _ = data.partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        return len(head) + 4 + (int(found.group(1)) if found else 0)

    def close(self) -> None:
        self.done.set()
        self.release.set()
        self.listener.close()


@pytest.fixture
def stub_stream() -> Iterator[StubPalace]:
    stub = StubPalace("stream")
    yield stub
    stub.close()


@pytest.fixture
def stub_silent() -> Iterator[StubPalace]:
    stub = StubPalace("silent")
    yield stub
    stub.close()


def test_a_stream_is_passed_on_before_it_ends(
        tmp_path: Path, started: list[subprocess.Popen[str]], stub_stream: StubPalace) -> None:
    recorder, url, out = start_recorder(tmp_path, started, stub_stream.url)
    received = b""
    with httpx.Client(timeout=20) as client, client.stream(
            "POST", url, json=CALL,
            headers={"Accept": "application/json, text/event-stream"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        chunks = response.iter_raw()
        while b"notifications/progress" not in received:
            received += next(chunks)  # a buffering relay would leave this waiting (20 s)
        assert not stub_stream.release.is_set()  # the palace has not finished its answer
        stub_stream.release.set()
        received += b"".join(chunks)
    assert b'"total_drawers' in received and received.count(b"data: ") == 2
    assert stop(recorder)[0] == 0
    calls = [s for s in json.loads(out.read_text())["steps"] if s["op"] == "call_tool"]
    assert calls[0]["expect"] == {"ok": True, "result": {"is_error": False,
                                                         "json": {"total_drawers": 3}}}


def test_a_silent_palace_gets_the_bridge_a_504_not_a_hang(
        tmp_path: Path, started: list[subprocess.Popen[str]], stub_silent: StubPalace) -> None:
    recorder, url, out = start_recorder(tmp_path, started, stub_silent.url,
                                        "--upstream-timeout-ms", "300")
    answer = httpx.post(url, json=CALL, timeout=30)
    assert answer.status_code == 504
    assert answer.text.startswith("palace-conformance record: ")
    code, stderr = stop(recorder, signal.SIGINT)
    assert code == 0 and "504" in stderr and "Traceback" not in stderr
    step = next(s for s in json.loads(out.read_text())["steps"] if s["op"] == "call_tool")
    assert "expect" not in step and "never replied" in step["comment"]


def test_ctrl_c_with_an_answer_in_flight_stops_cleanly_and_keeps_the_draft(
        tmp_path: Path, started: list[subprocess.Popen[str]], stub_silent: StubPalace) -> None:
    recorder, url, out = start_recorder(tmp_path, started, stub_silent.url)
    outcome: list[object] = []

    def ask() -> None:
        try:
            outcome.append(httpx.post(url, json=CALL, timeout=60).status_code)
        except httpx.HTTPError as exc:
            outcome.append(type(exc).__name__)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    assert stub_silent.asked.wait(30)  # the request went through the recorder
    code, stderr = stop(recorder, signal.SIGINT)  # the palace still holds the answer
    assert code == 0 and "Traceback" not in stderr
    asker.join(30)
    assert outcome and outcome[0] != 200  # the bridge's connection ended, no made-up answer
    assert [s["name"] for s in json.loads(out.read_text())["steps"]
            if s["op"] == "call_tool"] == ["mempalace_status"]


def run_record(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "palace-conformance"), "record", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env=clean_env())


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}/mcp"
    with socket.create_server(("127.0.0.1", 0)) as busy:
        taken = str(busy.getsockname()[1])
        live = f"http://127.0.0.1:{taken}/mcp"  # accepts connections: reachable
        cases = [
            (["--upstream", refused], "cannot reach --upstream"),
            (["--upstream", "ftp://palace/mcp"], "is not an http(s) URL"),
            (["--upstream", "http:///mcp"], "is not an http(s) URL"),
            (["--upstream", "http://127.0.0.1:99999/mcp"], "is not a URL"),
            (["--upstream", live, "--port", taken], "is in use"),
            (["--upstream", live, "--port", "70000"], "--port must be 0-65535"),
            (["--upstream", live, "--host", "0.0.0.0"], "is not a loopback address"),
            (["--upstream", live, "--upstream-timeout-ms", "0"], "--upstream-timeout-ms"),
            (["--upstream", live, "--", "mempalace-mcp"], "not both"),
            (["--port", "0"], "add --upstream URL"),
        ]
        for args, wanted in cases:
            done = run_record(tmp_path, "--out", "tool.x.json", *args)
            assert done.returncode == 2, (args, done.stderr)
            assert wanted in done.stderr, (args, done.stderr)
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert done.stdout == ""
    assert not (tmp_path / "tool.x.json").exists()  # nothing ran: no draft


def test_event_stream_reader_and_header_filter() -> None:
    events = EventStream()
    got = [*events.feed(b"event: message\r\ndata: {\"a\":\r\ndata:  1}\r"),
           *events.feed(b"\n\r\n: keepalive\n\nid: 3\ndata: x\n"), *events.feed(b"\n")]
    assert got == ['{"a":\n 1}', "x"]
    headers = relayed([("Host", "h"), ("Connection", "close, X-Hop"), ("X-Hop", "1"),
                       ("Authorization", "Bearer t"), ("Mcp-Session-Id", "s"),
                       ("Transfer-Encoding", "chunked"), ("Accept", "a"), ("Accept", "b")])
    assert headers == [("Authorization", "Bearer t"), ("Mcp-Session-Id", "s"),
                       ("Accept", "a"), ("Accept", "b")]
