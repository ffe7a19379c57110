"""The same fault scenario against the fake and against the real mempalace through the fault relay
(``relay/fault_stdio.py``, ``relay/fault_http.py``): the same verdict, for every fault action the
fake has. Each action is exercised by one scenario that holds it (the catalogue's, or one of
``relay_scenarios/`` for an action no catalogue scenario passes on the real server within its
timing bounds on a loaded machine); both runs must pass, and a fault must fire on the real one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.cli import main
from palace_conformance.fake.faults import ACTIONS
from palace_conformance.scenarios.loader import scenarios_dir

HERE = Path(__file__).parent / "relay_scenarios"

#: fault action -> (scenario id, transport) whose run holds that action
BY_ACTION: dict[str, tuple[str, str]] = {
    "accept_202": ("http.content.wrong-answers-fail-fast", "http"),
    "answer_status": ("http.answers.any-2xx-is-the-answer", "http"),
    "content_type": ("http.content.wrong-answers-fail-fast", "http"),
    "delay": ("feed.mine.timeout-zero-uncapped", "stdio"),
    "drip_progress": ("tool.drip.progress-then-answer", "http"),
    "duplicate_response": ("http.sse.slow-streams-accepted", "http"),
    "error": ("tool.errors.codes-and-data-kept", "stdio"),
    "exit": ("stdio.exit.crashed-write-never-replayed", "stdio"),
    "flood_stderr": ("stdio.stderr.debug-forwards", "stdio"),
    "forget_session": ("http.preamble.first-on-every-session", "http"),
    "garbage": ("stdio.junk.bad-line-logged-in-debug", "stdio"),
    "http_status": ("http.connect.initialized-answered-300-fails-start", "http"),
    "ignore_sigterm": ("life.shutdown.kill-grace-zero-kills-at-once", "stdio"),
    "lock_held": ("feed.lock.refused-then-next-trigger-remines", "stdio"),
    "negotiate_version": ("http.version.negotiated-version-sent", "http"),
    "notify": ("http.sse.slow-streams-accepted", "http"),
    "oversized": ("tool.answers.large-answer-accepted", "stdio"),
    "partial_line": ("stdio.partial.half-line-then-exit", "stdio"),
    "reset": ("http.connect.transient-failure-retried", "http"),
    "result": ("life.handshake.tools-list-pages", "stdio"),
    "retype_id": ("tool.ids.other-json-type-ignored", "stdio"),
    "rotate_token": ("http.rotate.token-rotated-by-a-fault", "http"),
    "server_request": ("tool.server-request.refused-at-once", "stdio"),
    "spawn_grandchild": ("life.shutdown.grandchild-dies-with-child", "stdio"),
    "sse": ("http.sse.crlf-split-after-a-long-line", "http"),
    "stall": ("stdio.timeout.stall-kills-child", "stdio"),
    "startup_fail": ("stdio.start.tolerant-first-start", "stdio"),
    "write_stderr": ("stdio.stderr.token-split-across-reads-redacted", "stdio"),
    "wrong_id": ("tool.ids.null-id-result-never-the-answer", "stdio"),
}


def _file(sid: str) -> str:
    own = HERE / f"{sid}.json"
    if own.exists():
        return str(own)
    return str(scenarios_dir() / sid.split(".", 1)[0] / f"{sid}.json")


def test_every_fault_action_of_the_fake_is_exercised() -> None:
    assert set(BY_ACTION) == set(ACTIONS)
    for action, (sid, transport) in BY_ACTION.items():
        data = json.loads(Path(_file(sid)).read_text(encoding="utf-8"))
        held = {f["action"] for f in data.get("faults", [])
                if f.get("on", {}).get("transport") in (None, transport)}
        assert action in held, (action, sid)
        assert transport in data["transports"] and transport in ACTIONS[action][0], action


def _verdicts(capsys: pytest.CaptureFixture[str], tmp_path: Path, server: str
              ) -> dict[tuple[str, str], dict[str, Any]]:
    out_json = tmp_path / f"{server}.json"
    files = sorted({_file(sid) for sid, _ in BY_ACTION.values()})
    with pytest.raises(SystemExit):
        main(["run", *files, "--server", server, "--transport", "both", "--jobs", "2",
              "--json", str(out_json), "--report-dir", str(tmp_path / server)])
    capsys.readouterr()
    data = json.loads(out_json.read_text(encoding="utf-8"))
    return {(r["scenario"], r["transport"]): r for r in data["results"]}


@pytest.mark.real_palace
@pytest.mark.timeout(2400)  # 31 runs on each server; the real server's cold starts dominate
def test_the_same_fault_scenario_gets_the_same_verdict_on_the_fake_and_the_real_server(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fake = _verdicts(capsys, tmp_path, "fake")
    real = _verdicts(capsys, tmp_path, "real")
    table = []
    for action, key in sorted(BY_ACTION.items()):
        table.append((action, *key, fake[key]["status"], real[key]["status"]))
    shown = "\n".join(" ".join(row) for row in table)
    assert all(row[3] == row[4] == "passed" for row in table), shown
    for action, (sid, transport) in BY_ACTION.items():  # the relay, not luck, gave the verdict
        journal = tmp_path / "real" / "runs" / sid / transport / "journal.jsonl"
        records = [json.loads(line) for line in journal.read_text().splitlines() if line]
        assert any(r.get("kind") == "fault" and r.get("action") == action
                   for r in records), (action, sid)
