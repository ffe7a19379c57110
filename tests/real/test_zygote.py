"""The pre-started real server (``relay/zygote.py``): a zygote forks each spawn a relay asks for,
on the relay's pipes and environment, reports its exit code, and kills it when the relay's end
of the spawn goes. Run here with the kit's own Python and a standard-library module standing in
for the real server's entry point (the zygote is standard library only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from palace_conformance import processes
from palace_conformance.relay import zygote

KIT = str(Path(zygote.__file__).resolve().parents[2])


@pytest.fixture
def zygote_socket(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "z.sock")
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import sys; sys.path[:0] = [{KIT!r}]; "
         "from palace_conformance.relay import zygote; zygote.serve(sys.argv[1])", path],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == b"ready"
    yield path
    proc.stdin.close()
    proc.wait(30)


def _config(path: str, *args: str) -> dict[str, object]:
    return {zygote.CONFIG_KEY: path, "command": [sys.executable, "-m", *args]}


def test_a_spawn_runs_on_the_relays_pipes_with_its_environment(
        zygote_socket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "ZYGOTE_PROBE": "seen"}
    code = "import os, sys; print(os.environ['ZYGOTE_PROBE'], sys.stdin.read().upper())"
    (tmp_path / "probe_mod.py").write_text(code, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the child runs in the relay's directory ('' is on its path)
    proc = zygote.spawn(_config(zygote_socket, "probe_mod"), env, stdin=True, stdout=True)
    assert proc is not None and proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"hello")
    proc.stdin.close()
    assert proc.stdout.read().strip() == b"seen HELLO"
    assert proc.wait(30) == 0


def test_an_exit_code_comes_back(zygote_socket: str) -> None:
    proc = zygote.spawn(_config(zygote_socket, "json.tool"), dict(os.environ), stdin=True,
                        stdout=True)
    assert proc is not None and proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"{not json")
    proc.stdin.close()
    proc.stdout.read()
    assert proc.wait(30) == 1


def test_the_child_dies_when_the_relays_end_goes(zygote_socket: str) -> None:
    proc = zygote.spawn(_config(zygote_socket, "json.tool"), dict(os.environ), stdin=True,
                        stdout=True)
    assert proc is not None
    assert proc.poll() is None  # json.tool waits for its stdin's end
    proc._conn.close()  # the relay is gone (its stdin pipe is still open: only the lifeline)
    deadline = time.monotonic() + 30
    while processes.alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes.alive(proc.pid)


def test_no_zygote_or_an_unknown_command_starts_cold() -> None:
    assert zygote.spawn({"command": ["mempalace-mcp"]}, {}, stdin=True, stdout=True) is None
    assert zygote.spawn({zygote.CONFIG_KEY: "/nonexistent/z.sock",
                         "command": ["mempalace-mcp"]}, {}, stdin=True, stdout=True) is None
    assert zygote.entry_for(["node", "server.js"]) is None
    assert zygote.entry_for(["/venv/bin/mempalace-mcp"]) == {
        "module": "mempalace.mcp_proxy", "function": "main", "argv": ["/venv/bin/mempalace-mcp"]}
    assert json.dumps(zygote.entry_for(["py", "-m", "mempalace.mcp_server", "--transport",
                                        "http"])) == json.dumps(
        {"module": "mempalace.mcp_server", "function": None,
         "argv": ["mempalace.mcp_server", "--transport", "http"]})


ANSWER_INITIALIZE = ("import json, sys\n"
                     "for line in sys.stdin:\n"
                     "    if json.loads(line).get('method') == 'initialize':\n"
                     "        print(json.dumps({'jsonrpc': '2.0', 'id': 1, 'result': {}}), "
                     "flush=True)\n")


class _StandIn:
    """A server whose stdio command is a module answering initialize (what measure() runs)."""

    def stdio_command(self) -> list[str]:
        return [sys.executable, "-m", "answer_initialize"]


def test_the_start_is_measured_through_the_zygote_and_cold(
        zygote_socket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from palace_conformance.real import start_time

    (tmp_path / "answer_initialize.py").write_text(ANSWER_INITIALIZE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for path, how in ((zygote_socket, "through the pre-started server"), (None, "cold")):
        figure = start_time.measure(_StandIn(), env, path)  # type: ignore[arg-type]
        assert figure.how == how and len(figure.samples) == start_time.SAMPLES
        assert 0 < figure.ms < start_time.SAMPLE_LIMIT_S * 1000  # answered, not timed out
        assert sorted(figure.samples)[1] == figure.ms


def test_the_launcher_asks_for_its_server_before_the_relay_imports(
        zygote_socket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "probe_env.py").write_text(
        "import os, sys; print(os.environ['MEMPALACE_PALACE_PATH'], os.environ['EXTRA'], "
        "'PYTHONPATH' in os.environ); print('starting', file=sys.stderr)", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/nowhere")  # the kit's path never reaches the server
    config = tmp_path / "relay.json"
    config.write_text(json.dumps({**_config(zygote_socket, "probe_env"), "palace": "/p",
                                  "env": {"EXTRA": "x"}}), encoding="utf-8")
    proc = zygote.spawn_early(str(config))
    assert proc is not None and proc.stdout is not None
    assert proc.stdout.read().split() == [b"/p", b"x", b"False"]
    assert proc.wait(30) == 0
    # its stderr is held for the relay to pass on after its own start-up writes
    assert proc.stderr is not None and proc.stderr.read() == b"starting\n"
    no_zygote = tmp_path / "cold.json"
    no_zygote.write_text(json.dumps({"command": ["mempalace-mcp"], "palace": "/p"}),
                         encoding="utf-8")
    assert zygote.spawn_early(str(no_zygote)) is None  # the relay starts it cold itself
