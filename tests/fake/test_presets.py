"""Named fault presets: the data file is valid, every preset fires as its description says, and
it does so for a harness whose only change is ``PATH`` (stdio, through the shim; a preset that
scripts a stand-in, through the stand-in the shim places) or the URL it is given (HTTP,
``fake http --preset``).

Each preset has a probe here: the request a harness would send first and what it then sees. A
preset added to ``fixtures/fake-presets.json`` without a probe fails
:func:`test_every_preset_has_a_probe`.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from jsonschema import Draft202012Validator

from palace_conformance.fake.faults import FakeSetupError, FaultPlanError
from palace_conformance.fake.presets import (
    PRESETS_FILE,
    find_preset,
    load_presets,
    presets_from_json,
)
from palace_conformance.resources import fixtures_dir

from .http_support import Fake, launch, start_fake
from .stdio_harness import FakeProcess, run_cli, wait_for

PRESETS = load_presets()
STDIO = sorted(name for name, p in PRESETS.items() if "stdio" in p.transports)
# `fake http --preset`: a preset with server faults (a stand-in-only one is refused there)
HTTP = sorted(name for name, p in PRESETS.items() if "http" in p.transports and p.faults)
QUIET = 1.5  # "no answer": nothing within this long (a lower bound, never a timing claim)
#: what the harness starts for a stand-in preset (found on PATH, as a feeding bridge runs it)
HARNESS_RUNS = {"wedged-prepare": ["mempalace-pi-session", "--prepare", "--reason", "manual"]}


def _fired(records: list[dict[str, object]], preset: str) -> list[dict[str, object]]:
    """What the journal shows the preset did: its faults, or a stand-in step it scripted."""
    return [r for r in records if (r.get("kind") == "fault"
                                   and str(r.get("fault_id", "")).startswith(f"preset-{preset}-"))
            or (r.get("kind") == "feed_step" and r.get("preset") == preset)]


# -- the data ------------------------------------------------------------------------------


def test_presets_file_matches_its_schema() -> None:
    schema = json.loads((fixtures_dir() / "schema" / "fake-presets.schema.json").read_text())
    data = json.loads((fixtures_dir() / PRESETS_FILE).read_text())
    Draft202012Validator.check_schema(schema)
    assert list(Draft202012Validator(schema).iter_errors(data)) == []
    broken = {**data, "presets": {"Bad Name": data["presets"]["stalled-search"]}}
    assert list(Draft202012Validator(schema).iter_errors(broken))
    two_lines = {"description": "a\nb", "transports": ["stdio"], "faults": ["stall"]}
    assert list(Draft202012Validator(schema).iter_errors({**data, "presets": {"x": two_lines}}))


def test_readmes_symptom_table_names_real_presets_for_each_fault_the_issue_lists() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "fake.md").read_text(encoding="utf-8")
    section = readme.split("## Reproduce a palace fault locally", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:4] for line in section.splitlines()
            if line.startswith("| ") and "`" in line.split("|")[2]]
    named = {cell.split("`")[1]: how.strip() for _, cell, how in rows}
    assert set(named) <= set(PRESETS)
    assert {"stalled-search", "crash-on-write", "lock-held", "slow-start", "session-lost-every-5",
            "token-rejected", "wedged-prepare", "stderr-flood", "html-errors"} <= set(named)
    for name, how in named.items():  # the route it names is the one the preset can take
        assert ("install-shim" in how) is ("stdio" in PRESETS[name].transports), name
        assert ("fake http" in how) is bool(PRESETS[name].faults and
                                             "http" in PRESETS[name].transports), name


def test_a_preset_with_a_typod_target_or_wrong_transport_is_refused() -> None:
    with pytest.raises(FaultPlanError, match=r"preset 'p'.*did you mean 'mempalace_search'"):
        presets_from_json({"presets": {"p": {"description": "a stalled search",
                                             "transports": ["stdio"],
                                             "faults": ["stall@mempalace_serch"]}}})
    with pytest.raises(FaultPlanError, match="fires only over http"):
        presets_from_json({"presets": {"p": {"description": "a forgotten session",
                                             "transports": ["stdio", "http"],
                                             "faults": ["forget_session@tools/call"]}}})


def test_every_preset_has_a_probe() -> None:
    assert set(STDIO_PROBES) == set(STDIO)
    assert set(HTTP_PROBES) == set(HTTP)
    assert set(HARNESS_RUNS) == {name for name, p in PRESETS.items() if p.standins}
    for preset in PRESETS.values():
        assert preset.description and "\n" not in preset.description


def test_presets_lists_one_line_each_and_unknown_names_name_the_nearest(tmp_path: Path) -> None:
    listed = run_cli(["fake", "presets"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(PRESETS)
    assert "stdio/http" in lines[0] and PRESETS[lines[0].split()[0]].description in lines[0]
    for command in (["fake", "stdio"], ["fake", "http"]):
        wrong = run_cli([*command, "--preset", "stalled-serch"], tmp_path)
        assert wrong.returncode == 2
        assert wrong.stderr.count("\n") == 1, wrong.stderr
        assert "unknown preset 'stalled-serch'; did you mean 'stalled-search'?" in wrong.stderr
    shim = run_cli(["fake", "install-shim", str(tmp_path / "s"), "--preset", "session-expired"],
                   tmp_path)
    assert shim.returncode == 2 and shim.stderr.count("\n") == 1
    assert "fake http --preset session-expired" in shim.stderr
    with pytest.raises(FakeSetupError, match="did you mean 'lock-held'"):
        find_preset("lock-hold")


# -- stdio: the shim, spawned by name from PATH ---------------------------------------------


def _init(proc: FakeProcess) -> None:
    reply = proc.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "harness", "version": "1"}})
    assert reply["result"]["serverInfo"]["name"] == "mempalace"
    proc.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def _send_call(proc: FakeProcess, tool: str, arguments: dict[str, object] | None = None,
               meta: dict[str, object] | None = None) -> int:
    request_id = proc.next_id()
    params: dict[str, object] = {"name": tool, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    proc.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
    return request_id


def _stalled_search(proc: FakeProcess) -> None:
    _init(proc)
    _send_call(proc, "mempalace_search", {"query": "anything"})
    proc.assert_silent(QUIET)
    assert _fired(proc.journal(), "stalled-search")[0]["action"] == "stall"
    assert proc.alive()  # hung, not dead (mempalace serves stdio one message at a time)


def _slow_search(proc: FakeProcess) -> None:
    _init(proc)
    sent = time.monotonic()
    request_id = _send_call(proc, "mempalace_search", {"query": "anything"})
    when, reply = proc.recv_timed(timeout=30)
    assert reply["id"] == request_id and "result" in reply
    assert when - sent >= 5.0  # the preset's delay; a lower bound only
    assert _fired(proc.journal(), "slow-search")[0]["action"] == "delay"


def _progress_then_stall(proc: FakeProcess) -> None:
    _init(proc)
    _send_call(proc, "mempalace_status", meta={"progressToken": "p1"})
    notes = [proc.recv(timeout=10) for _ in range(3)]
    assert [n["method"] for n in notes] == ["notifications/progress"] * 3
    assert [n["params"]["progressToken"] for n in notes] == ["p1"] * 3
    proc.assert_silent(QUIET)


def _crash_on_first_call(proc: FakeProcess) -> None:
    _init(proc)
    _send_call(proc, "mempalace_status")
    assert proc.finish() == 1
    assert proc.lines.empty()


def _crash_on_write(proc: FakeProcess) -> None:
    _init(proc)
    assert "result" in proc.call("mempalace_status")  # a read is not the matching request
    _send_call(proc, "mempalace_add_drawer", {"wing": "w", "room": "r", "content": "x"})
    assert proc.finish() == 1
    assert proc.lines.empty()


def _crash_at_start(proc: FakeProcess) -> None:
    assert proc.finish() == 1
    assert "cannot open palace (palace-conformance preset crash-at-start)" in proc.stderr_text()
    assert proc.lines.empty()


def _slow_start(proc: FakeProcess) -> None:
    proc.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18"}})
    when, reply = proc.recv_timed(timeout=30)
    assert reply["id"] == 1 and "result" in reply
    assert when - proc.started >= 5.0  # lower bound only


def _lock_held(proc: FakeProcess) -> None:
    _init(proc)
    assert "result" in proc.call("mempalace_status")  # reads still work
    error = proc.call("mempalace_diary_write", {"agent_name": "a", "entry": "x"})["error"]
    assert error["code"] == -32001
    assert "is held by PID 4242 (mempalace-mcp)" in error["data"]["reason"]


def _garbage_on_stdout(proc: FakeProcess) -> None:
    _init(proc)
    _send_call(proc, "mempalace_status")
    line = proc.recv_line()
    assert line.startswith(b"Traceback (most recent call last)")
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


def _deaf_to_sigterm(proc: FakeProcess) -> None:
    _init(proc)
    proc.signal(signal.SIGTERM)
    wait_for(lambda: proc.records("signal", action="ignored"), what="SIGTERM ignored")
    assert proc.alive()
    proc.ping()
    proc.signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL


def _stderr_flood(proc: FakeProcess) -> None:
    _init(proc)  # answered although nothing read stderr until now: the pump drains it
    wait_for(lambda: len(proc.stderr) >= 4 * 1024 * 1024, what="4 MiB of stderr")


def _wedged_prepare(proc: FakeProcess) -> None:
    # proc is `mempalace-pi-session --prepare`, as a feeding bridge runs it: it hangs, silent
    step = wait_for(lambda: proc.records("feed_step"), what="the stand-in's step")[0]
    assert (step["mode"], step["preset"]) == ("hang", "wedged-prepare")
    proc.assert_silent(QUIET)
    assert proc.alive()  # wedged, not failed: only the bridge's kill ends it
    proc.signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert proc.lines.empty()  # never a MINE_SOURCE line


STDIO_PROBES: dict[str, Callable[[FakeProcess], None]] = {
    "stalled-search": _stalled_search,
    "slow-search": _slow_search,
    "progress-then-stall": _progress_then_stall,
    "crash-on-first-call": _crash_on_first_call,
    "crash-on-write": _crash_on_write,
    "crash-at-start": _crash_at_start,
    "slow-start": _slow_start,
    "lock-held": _lock_held,
    "garbage-on-stdout": _garbage_on_stdout,
    "deaf-to-sigterm": _deaf_to_sigterm,
    "stderr-flood": _stderr_flood,
    "wedged-prepare": _wedged_prepare,
}


@pytest.mark.parametrize("name", STDIO)
def test_a_shim_installed_with_a_preset_fires_it_for_a_harness_that_only_changed_path(
        tmp_path: Path, name: str) -> None:
    shims = tmp_path / "shims"
    installed = run_cli(["fake", "install-shim", str(shims), "--preset", name], tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert f'export PATH={shims}:"$PATH"' in installed.stderr
    assert f"# preset {name}: {PRESETS[name].description}\n" in installed.stderr
    # the harness: `mempalace-mcp` (or the stand-in it feeds through) by name, found on PATH;
    # nothing else names the fault
    path = f"{shims}{os.pathsep}{os.environ['PATH']}"
    with FakeProcess(tmp_path, command=HARNESS_RUNS.get(name, ["mempalace-mcp"]),
                     env={"PATH": path}, palace_arg=name not in HARNESS_RUNS) as proc:
        STDIO_PROBES[name](proc)
    if name != "crash-at-start":
        assert _fired(proc.journal(), name), "the preset's fault was never journaled"


def test_a_stand_in_preset_leaves_the_server_clean_and_is_refused_where_it_cannot_act(
        tmp_path: Path) -> None:
    shims = tmp_path / "shims"
    assert run_cli(["fake", "install-shim", str(shims), "--preset", "wedged-prepare"],
                   tmp_path).returncode == 0
    path = f"{shims}{os.pathsep}{os.environ['PATH']}"
    with FakeProcess(tmp_path / "server", command=["mempalace-mcp"], env={"PATH": path}) as proc:
        _init(proc)  # the palace itself answers as usual: only the prepare step wedges
        assert "result" in proc.call("mempalace_status")
    assert not [r for r in proc.journal() if r.get("kind") == "fault"]
    # the stand-in's own variable beats the preset, as the environment beats any baked preset
    with FakeProcess(tmp_path / "feed", command=HARNESS_RUNS["wedged-prepare"], palace_arg=False,
                     env={"PATH": path, "PALACE_FEED_MODE": "source"}) as proc:
        assert proc.recv_line().startswith(b"MINE_SOURCE=")
        assert proc.wait() == 0
    hint = ("preset 'wedged-prepare' scripts the mempalace-pi-session stand-in, not the server; "
            "run 'palace-conformance fake install-shim DIR --preset wedged-prepare'")
    for command in (["fake", "stdio"], ["fake", "http"],
                    ["fake", "ctl", "--url", "http://127.0.0.1:9", "inject"]):
        refused = run_cli([*command, "--preset", "wedged-prepare"], tmp_path)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert hint in refused.stderr


def test_a_bad_stand_in_script_in_a_presets_file_is_refused() -> None:
    def preset(**extra: object) -> dict[str, object]:
        return {"presets": {"p": {"description": "a wedged prepare", "transports": ["stdio"],
                                  **extra}}}

    with pytest.raises(FaultPlanError,
                       match=r"standins\.mempalace-pi-session\.mode must be one of"):
        presets_from_json(preset(standins={"mempalace-pi-session": {"mode": "wedge"}}))
    with pytest.raises(FaultPlanError, match="no stand-in 'mempalace-pi-sesion'"):
        presets_from_json(preset(standins={"mempalace-pi-sesion": {"mode": "hang"}}))
    with pytest.raises(FaultPlanError, match=r"'faults' must be a non-empty list.*leave it out"):
        presets_from_json(preset())
    with pytest.raises(FaultPlanError, match="exit must be an integer >= 0 and <= 255"):
        presets_from_json(preset(standins={"mempalace-pi-session": {"mode": "fail",
                                                                    "exit": 300}}))


def test_the_environment_beats_the_preset_baked_into_the_shim(tmp_path: Path) -> None:
    shims = tmp_path / "shims"
    assert run_cli(["fake", "install-shim", str(shims), "--preset", "crash-at-start"],
                   tmp_path).returncode == 0
    path = f"{shims}{os.pathsep}{os.environ['PATH']}"
    with FakeProcess(tmp_path, command=["mempalace-mcp"],
                     env={"PATH": path, "PALACE_FAKE_PRESET": "lock-held"}) as proc:
        _lock_held(proc)
    # and `python -m mempalace.mcp_server` with the shim directory's Python sees the preset too
    python = shims / ".palace" / "bin" / "python"
    with FakeProcess(tmp_path / "py", command=[str(python), "-m", "mempalace.mcp_server"],
                     env={"PATH": path}) as proc:
        _crash_at_start(proc)


# -- HTTP: fake http --preset and an HTTP client --------------------------------------------


def _mcp(fake: Fake, method: str, params: object = None, request_id: int = 1,
         session: str | None = None, **kwargs: object) -> httpx.Response:
    message: dict[str, object] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    headers = {"Mcp-Session-Id": session} if session else {}
    return fake.post(message, headers=headers, **kwargs)


def _http_init(fake: Fake) -> str | None:
    answer = _mcp(fake, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "harness", "version": "1"}})
    assert answer.status_code == 200, answer.text
    return answer.headers.get("mcp-session-id")


def _search(fake: Fake, session: str | None, timeout: float = 10) -> httpx.Response:
    return _mcp(fake, "tools/call", {"name": "mempalace_search",
                                     "arguments": {"query": "q"}}, 2, session, timeout=timeout)


def _h_stalled_search(fake: Fake) -> None:
    session = _http_init(fake)
    with pytest.raises(httpx.ReadTimeout):
        _search(fake, session, timeout=QUIET)


def _h_slow_search(fake: Fake) -> None:
    session = _http_init(fake)
    sent = time.monotonic()
    assert _search(fake, session, timeout=30).status_code == 200
    assert time.monotonic() - sent >= 5.0  # lower bound only


def _h_progress_then_stall(fake: Fake) -> None:
    session = _http_init(fake)
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "mempalace_status", "arguments": {},
                          "_meta": {"progressToken": "p1"}}}
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    seen: list[str] = []
    with pytest.raises(httpx.ReadTimeout), fake.http.stream(
            "POST", fake.url, content=json.dumps(message), headers=headers,
            timeout=httpx.Timeout(10, read=QUIET + 1.0)) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert session is None
        for line in stream.iter_lines():
            if line.startswith("data:"):
                seen.append(json.loads(line[5:])["method"])
    assert seen == ["notifications/progress"] * 3


def _h_crash(fake: Fake, tool: str) -> None:
    _http_init(fake)
    with pytest.raises(httpx.TransportError):
        _mcp(fake, "tools/call", {"name": tool, "arguments": {"wing": "w", "room": "r",
                                                              "content": "x"}}, 2)
    assert fake.proc.wait(10) == 1


def _h_slow_start(fake: Fake) -> None:
    assert _fired(fake.records(), "slow-start")[0]["method"] == "$startup"
    _http_init(fake)


def _h_lock_held(fake: Fake) -> None:
    _http_init(fake)
    answer = _mcp(fake, "tools/call", {"name": "mempalace_diary_write",
                                       "arguments": {"agent_name": "a", "entry": "x"}}, 2)
    assert answer.json()["error"]["code"] == -32001


def _h_deaf_to_sigterm(fake: Fake) -> None:
    fake.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: fake.records("signal"), what="SIGTERM journaled")
    assert fake.records("signal")[0]["action"] == "ignored"
    _http_init(fake)
    fake.proc.kill()
    assert fake.proc.wait(10) == -signal.SIGKILL


def _h_stderr_flood(fake: Fake) -> None:
    assert len(fake.stderr()) >= 4 * 1024 * 1024
    assert _fired(fake.records(), "stderr-flood")


def _h_session_expired(fake: Fake) -> None:
    session = _http_init(fake)
    assert session  # the preset turns sessions on
    answer = _search(fake, session)
    assert answer.status_code == 404 and "Session not found" in answer.text
    assert _search(fake, session).status_code == 404  # the session is gone for good


def _h_session_lost_every_5(fake: Fake) -> None:
    # the harness's session recovery, twice: calls 1-4 pass, the 5th is 404; a new session
    # serves 6-9, and the 10th is 404 again (every 5th tool call, counted across sessions)
    statuses = []
    for _ in range(2):
        session = _http_init(fake)
        assert session
        for _ in range(5):
            answer = _search(fake, session)
            statuses.append(answer.status_code)
        assert "Session not found" in answer.text
    assert statuses == [200, 200, 200, 200, 404] * 2
    assert [r["occurrence"] for r in _fired(fake.records(), "session-lost-every-5")] == [5, 10]


def _h_token_rejected(fake: Fake) -> None:
    session = _http_init(fake)
    assert _search(fake, session).status_code == 401
    assert _mcp(fake, "ping", request_id=3).status_code == 401


def _h_html_errors(fake: Fake) -> None:
    session = _http_init(fake)
    for _ in range(2):
        answer = _search(fake, session)
        assert answer.status_code == 502 and answer.headers["content-type"].startswith(
            "text/html")


def _h_connection_reset(fake: Fake) -> None:
    session = _http_init(fake)
    with pytest.raises(httpx.TransportError):
        _search(fake, session)
    assert _search(fake, session).status_code == 200  # once only


def _h_stream_stalls(fake: Fake) -> None:
    session = _http_init(fake)
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "mempalace_status", "arguments": {}}}
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    seen: list[str] = []
    with pytest.raises(httpx.ReadTimeout), fake.http.stream(
            "POST", fake.url, content=json.dumps(message), headers=headers,
            timeout=httpx.Timeout(10, read=QUIET + 1.0)) as stream:
        assert stream.status_code == 200 and session is None
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            seen.append(line)
    assert seen and not any(line.startswith("data:") for line in seen)


HTTP_PROBES: dict[str, Callable[[Fake], None]] = {
    "stalled-search": _h_stalled_search,
    "slow-search": _h_slow_search,
    "progress-then-stall": _h_progress_then_stall,
    "crash-on-first-call": lambda fake: _h_crash(fake, "mempalace_status"),
    "crash-on-write": lambda fake: _h_crash(fake, "mempalace_add_drawer"),
    "crash-at-start": lambda fake: None,  # never listens: see the test
    "slow-start": _h_slow_start,
    "lock-held": _h_lock_held,
    "deaf-to-sigterm": _h_deaf_to_sigterm,
    "stderr-flood": _h_stderr_flood,
    "session-expired": _h_session_expired,
    "session-lost-every-5": _h_session_lost_every_5,
    "token-rejected": _h_token_rejected,
    "html-errors": _h_html_errors,
    "connection-reset": _h_connection_reset,
    "stream-stalls": _h_stream_stalls,
}


@pytest.mark.parametrize("name", HTTP)
def test_fake_http_with_a_preset_fires_it_on_the_first_matching_request(
        tmp_path: Path, name: str) -> None:
    if name == "crash-at-start":
        proc = launch(tmp_path, "--port", "0", "--preset", name)
        assert proc.wait(30) == 1
        assert "preset crash-at-start" in (tmp_path / "stderr.txt").read_text()
        return
    fake = start_fake(tmp_path, "--preset", name)
    try:
        assert f"preset {name}: start your harness with MEMPALACE_REMOTE_URL={fake.url}" \
            in fake.stderr()
        HTTP_PROBES[name](fake)
    finally:
        fake.stop()
    assert _fired(fake.records(), name), "the preset's fault was never journaled"


def test_http_preset_over_a_shim_env_is_refused_for_stdio(tmp_path: Path) -> None:
    with FakeProcess(tmp_path, env={"PALACE_FAKE_PRESET": "html-errors"}) as proc:
        assert proc.finish() == 2
        assert "preset 'html-errors' fires only over http" in proc.stderr_text()
