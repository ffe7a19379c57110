"""``fake ctl`` steers a running HTTP fake; ``fake journal`` shows a journal one line a record,
secrets hidden, live with ``--follow`` (ended by its deadline or by Ctrl-C, exit 130)."""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

from .http_support import start_fake
from .stdio_harness import PALACE_CONFORMANCE, FakeProcess, clean_env, run_cli, wait_for


def _call(url: str, session: str | None, tool: str = "mempalace_status") -> object:
    import httpx

    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               **({"Mcp-Session-Id": session} if session else {})}
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": tool, "arguments": {}}}
    return httpx.post(url, json=message, headers=headers, timeout=10)


def test_ctl_injects_clears_forgets_rotates_and_reports(tmp_path: Path) -> None:
    fake = start_fake(tmp_path / "fake", "--sessions")
    try:
        ctl = ["fake", "ctl", "--url", fake.url]
        init = fake.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18"}})
        session = init.headers["mcp-session-id"]

        typo = run_cli([*ctl, "inject", "stall@mempalace_serch"], tmp_path)
        assert typo.returncode == 2 and typo.stderr.count("\n") == 1
        assert "did you mean 'mempalace_search'?" in typo.stderr
        assert fake.control("DELETE", "faults").json() == {"cleared": 0}  # nothing was armed

        armed = run_cli([*ctl, "inject", "http_status@tools/call,status=503"], tmp_path)
        assert armed.returncode == 0 and armed.stdout == "armed ctl-1-http_status\n"
        assert _call(fake.url, session).status_code == 503  # type: ignore[attr-defined]
        assert _call(fake.url, session).status_code == 200  # type: ignore[attr-defined]

        status = run_cli([*ctl, "status"], tmp_path)
        assert status.returncode == 0 and status.stdout.count("\n") == 1
        assert "1 fault(s) fired, last: http_status (ctl-1-http_status)" in status.stdout
        assert "1 live session(s)" in status.stdout

        assert run_cli([*ctl, "inject", "--preset", "html-errors"], tmp_path).returncode == 0
        # the spent 503 fault stays listed until cleared
        assert run_cli([*ctl, "clear"], tmp_path).stdout == (
            "cleared 2 fault(s); the token is not a fault and stays as it is (rotate-token TOKEN "
            "or --none changes it)\n")
        assert _call(fake.url, session).status_code == 200  # type: ignore[attr-defined]

        forgot = run_cli([*ctl, "forget-sessions"], tmp_path)
        assert forgot.stdout == "forgot 1 session(s)\n"
        assert _call(fake.url, session).status_code == 404  # type: ignore[attr-defined]

        assert run_cli([*ctl, "rotate-token", "fresh-token-1"], tmp_path).returncode == 0
        assert _call(fake.url, None).status_code == 401  # type: ignore[attr-defined]
        assert run_cli([*ctl, "rotate-token", "--none"], tmp_path).stdout == \
            "token removed: no auth\n"
        assert "fresh-token-1" not in fake.journal_path.read_text()
    finally:
        fake.stop()


def test_ctl_against_nothing_or_no_control_api_is_one_line(tmp_path: Path) -> None:
    fake = start_fake(tmp_path / "fake", "--no-control")
    fake.stop()  # its port is now closed
    gone = run_cli(["fake", "ctl", "--url", fake.url, "status"], tmp_path)
    assert gone.returncode == 1 and gone.stderr.count("\n") == 1
    assert f"cannot reach a fake at {fake.base}" in gone.stderr
    bad = run_cli(["fake", "ctl", "--url", "not a url", "clear"], tmp_path)
    assert bad.returncode == 1 and "is not an http URL" in bad.stderr
    late = run_cli(["fake", "ctl", "--ready-file", str(tmp_path / "none.json"), "--wait", "0.2",
                    "status"], tmp_path)
    assert late.returncode == 1 and "did not appear within 0.2 s" in late.stderr
    with_no_control = start_fake(tmp_path / "nc", "--no-control")
    try:
        refused = run_cli(["fake", "ctl", "--url", with_no_control.url, "clear"], tmp_path)
        assert refused.returncode == 1 and "has no control API" in refused.stderr
    finally:
        with_no_control.stop()


def test_journal_is_one_readable_line_per_record_with_secrets_hidden(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    with FakeProcess(tmp_path, journal=journal, faults=["error@mempalace_search,code=-32001,"
                                                        "message=token s3cret-value-42 bad"]) as p:
        p.request("initialize", {"protocolVersion": "2025-06-18"})
        p.call("mempalace_search", {"query": "x", "api_key": "hunter2-hunter2"})
        p.close_stdin()
        p.wait()
    shown = run_cli(["fake", "journal", str(journal)], tmp_path,
                    MEMPALACE_REMOTE_TOKEN="s3cret-value-42")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == len([r for r in journal.read_text().splitlines() if r.strip()])
    assert any("-> tools/call mempalace_search  id=" in line for line in lines)
    assert any("!! fault error fired on mempalace_search (#1, cli-1-error)" in line
               for line in lines)
    assert any("<- error -32001 token <redacted-secret-1> bad" in line for line in lines)
    assert "s3cret-value-42" not in shown.stdout and "hunter2" not in shown.stdout
    assert lines[0].lstrip().startswith("+0.000s")
    missing = run_cli(["fake", "journal", str(tmp_path / "nope.jsonl")], tmp_path)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_journal_follow_shows_new_records_and_ends_on_deadline_or_ctrl_c(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    # Ctrl-C as a terminal delivers it: a pytest-xdist worker ignores SIGINT, and a child
    # inherits that, so the follower is given the default disposition back
    follow = subprocess.Popen([str(PALACE_CONFORMANCE), "fake", "journal", "--follow",
                               str(journal)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=clean_env(tmp_path),
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen: list[str] = []
    shown = threading.Event()

    def read_until_the_answer_is_shown() -> None:
        assert follow.stdout is not None
        for line in follow.stdout:
            seen.append(line)
            if "<- result  id=" in line:
                shown.set()

    reader = threading.Thread(target=read_until_the_answer_is_shown, daemon=True)
    reader.start()
    try:
        with FakeProcess(tmp_path, journal=journal) as proc:
            proc.ping()
        # Ctrl-C once the follower has shown the answer: it is then in its loop, not still
        # starting (a signal during start-up is Python's, not the follower's)
        assert shown.wait(timeout=30), "the follower never showed the ping's answer"
        follow.send_signal(signal.SIGINT)
        follow.wait(timeout=15)
        assert follow.stderr is not None
        err = follow.stderr.read()
        reader.join(timeout=15)
        out = "".join(seen)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert follow.returncode == 130, err
    assert "Traceback" not in err
    assert "-> ping  id=" in out and "<- result  id=" in out
    bounded = run_cli(["fake", "journal", "--follow", "--for", "0.5", str(journal)], tmp_path)
    assert bounded.returncode == 0 and "-> ping" in bounded.stdout


def test_journal_of_a_running_http_fake_by_url(tmp_path: Path) -> None:
    fake = start_fake(tmp_path / "fake", "--token", "bearer-secret-99")
    try:
        fake.post({"jsonrpc": "2.0", "id": 7, "method": "ping"},
                  headers={"Authorization": "Bearer bearer-secret-99"})
        wait_for(lambda: fake.records("http_response"), what="the ping answered")
        shown = run_cli(["fake", "journal", "--url", fake.url, "--follow", "--for", "1"],
                        tmp_path)
    finally:
        fake.stop()
    assert shown.returncode == 0, shown.stderr
    assert "-> ping  id=7" in shown.stdout and "<- HTTP 200" in shown.stdout
    assert "bearer-secret-99" not in shown.stdout


def test_journal_by_url_checks_the_url_as_ctl_does(tmp_path: Path) -> None:
    """One URL rule for both commands (``fake.ctl.base_url``): a wrong one is one line."""
    shown = run_cli(["fake", "journal", "--url", "ftp://nowhere"], tmp_path)
    assert shown.returncode == 1
    [line] = shown.stderr.strip().splitlines()
    assert "is not an http URL" in line
