"""The official MCP conformance suite (pinned, Node >= 22): its server scenarios against the fake
score exactly the baseline, and the reference bridge passes the client scenarios a tools-only
client is judged on, ``sse-retry`` (stream resumption, HTTP-12) included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

LAUNCH = "from palace_conformance.cli import main; main()"
RUN_TIMEOUT_S = 900


def official(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LAUNCH, "official", *args], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, check=False)


def checks(out: Path, scenario: str) -> dict[str, str]:
    """The non-traffic checks of one client scenario: id -> status."""
    [found] = [p for p in (out / "out").glob(f"{scenario}-*/checks.json")]
    return {c["id"]: c["status"] for c in json.loads(found.read_text()) if c["status"] != "INFO"}


def test_the_server_scenarios_against_the_fake_score_the_baseline(tmp_path: Path) -> None:
    report = tmp_path / "server.json"
    done = official("server", "--fake", "--json", str(report))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    verdicts = json.loads(report.read_text())["verdicts"]["fake"]
    assert len(verdicts) == 32, "every scenario of 0.1.16, the pending ones included"
    assert {s for s, v in verdicts.items() if v == "PASS"} == {
        "server-initialize", "ping", "tools-list", "dns-rebinding-protection"}
    assert verdicts["server-sse-polling"] == "WARN" and verdicts["resources-list"] == "FAIL"


def test_the_reference_bridge_passes_initialize_tools_call_and_sse_retry(tmp_path: Path) -> None:
    report = tmp_path / "client.json"
    done = official("client", "--scenario", "initialize", "--scenario", "tools_call",
                    "--scenario", "sse-retry", "--out", str(tmp_path), "--json", str(report))
    verdicts = json.loads(report.read_text())["verdicts"]["reference"]
    assert verdicts["initialize"] == "PASS" and verdicts["tools_call"] == "PASS", done.stdout
    resumed = checks(tmp_path, "sse-retry")
    assert resumed["client-sse-graceful-reconnect"] == "SUCCESS", resumed
    assert resumed["client-sse-last-event-id"] == "SUCCESS", resumed
    # the suite grades the wait (450-700 ms for its 500 ms retry); a loaded machine may be late
    assert resumed["client-sse-retry-timing"] in ("SUCCESS", "WARNING"), resumed
