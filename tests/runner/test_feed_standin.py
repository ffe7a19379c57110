"""The runner's ``mempalace-pi-session`` stand-in does what ``helpers.feed`` says, run for real:
other stdout lines around the source, and a death by a signal after printing it."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.scenarios.loader import ScenarioError, load_scenario, scenarios_dir
from palace_conformance.scenarios.model import FeedHelper
from palace_conformance.standins import scripted


def run_helper(tmp_path: Path, feed: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Install the stand-in with ``feed`` as its configuration and run it as a bridge would."""
    shim_dir = tmp_path / "bin"
    config = FeedHelper.from_json(feed).to_config()
    scripted.install(shim_dir, {"journal": str(tmp_path / "journal.jsonl"),
                                "root": str(tmp_path), "feed": config})
    return subprocess.run([str(shim_dir / scripted.FEED_HELPER), "--prepare"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)


def test_other_output_goes_around_the_source_line(tmp_path: Path) -> None:
    done = run_helper(tmp_path, {"mine_source": str(tmp_path / "export"),
                                 "stdout_before": ["exporting 1 session"],
                                 "stdout_after": ["staged 1 session, 2 messages", ""]})
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["exporting 1 session",
                                        f"MINE_SOURCE={tmp_path / 'export'}",
                                        "staged 1 session, 2 messages", ""]


def test_other_output_without_a_source(tmp_path: Path) -> None:
    done = run_helper(tmp_path, {"mine_source": None, "stdout_after": ["nothing worth feeding"]})
    assert (done.returncode, done.stdout) == (0, "nothing worth feeding\n")


@pytest.mark.parametrize("name", scripted.KILL_SIGNALS)
def test_kill_signal_prints_everything_then_dies_by_that_signal(tmp_path: Path,
                                                                name: str) -> None:
    done = run_helper(tmp_path, {"mine_source": str(tmp_path / "export"),
                                 "stdout_after": ["bye"], "kill_signal": name})
    assert done.returncode == -getattr(signal, name)  # a signal death, not an exit status
    assert done.stdout.splitlines() == [f"MINE_SOURCE={tmp_path / 'export'}", "bye"]


def test_a_failure_exit_still_prints_nothing(tmp_path: Path) -> None:
    done = run_helper(tmp_path, {"mine_source": str(tmp_path / "export"), "exit_code": 3,
                                 "stdout_before": ["never printed"]})
    assert (done.returncode, done.stdout) == (3, "")


def test_an_unknown_signal_is_refused_by_the_stand_in(capsys: pytest.CaptureFixture[str]) -> None:
    assert scripted.run_feed({"kill_signal": "SIGSTOP"}) == 2
    assert "kill_signal 'SIGSTOP' is not one of" in capsys.readouterr().err


def test_the_model_round_trips_every_option() -> None:
    raw = {"mine_source": "${TMP}/x", "files": {"a": "b"}, "delay_ms": 5, "exit_code": 0,
           "stdout_before": ["b"], "stdout_after": ["a"], "kill_signal": "SIGTERM"}
    assert FeedHelper.from_json(raw).to_config() == raw
    assert FeedHelper.from_json(None).to_config()["kill_signal"] is None


def _write(tmp_path: Path, feed: dict[str, Any]) -> Path:
    sid = "feed.prepare.signal-death-no-mine"
    data = json.loads((scenarios_dir() / "feed" / f"{sid}.json").read_text())
    data["helpers"]["feed"].update(feed)
    path = tmp_path / "feed" / f"{sid}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("feed", "fragment"), [
    ({"exit_code": 3}, "a non-zero exit_code fails before the output"),
    ({"kill_signal": "SIGSTOP"}, "/helpers/feed/kill_signal"),
    ({"stdout_after": ["two\nlines"]}, "/helpers/feed/stdout_after/0"),
])
def test_the_loader_refuses_bad_options_in_one_line(tmp_path: Path, feed: dict[str, Any],
                                                    fragment: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        load_scenario(_write(tmp_path, feed))
    assert fragment in str(refused.value) and "\n" not in str(refused.value)
