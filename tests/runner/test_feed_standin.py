"""The runner's ``mempalace-pi-session`` stand-in does what ``helpers.feed`` says, run for real:
other stdout lines around the source, and a death by a signal after printing it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from palace_conformance import processes as procs
from palace_conformance.fake.journal import read_journal
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
           "stdout_before": ["b"], "stdout_after": ["a"], "kill_signal": "SIGTERM",
           "fork": {"child_ms": 10, "hold_stdout": False}}
    assert FeedHelper.from_json(raw).to_config() == raw
    assert FeedHelper.from_json(None).to_config()["kill_signal"] is None
    assert "fork" not in FeedHelper.from_json(None).to_config()


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


def _forked(tmp_path: Path) -> list[dict[str, Any]]:
    return [r for r in read_journal(tmp_path / "journal.jsonl")
            if r.get("kind") == "descendant_start"]


def test_a_forked_child_outlives_its_helper_until_its_group_is_killed(tmp_path: Path) -> None:
    """``fork``: the helper's child is journaled, stays in the helper's process group, ignores
    the helper's end, and dies when the group is signalled (what a group kill does)."""
    config = FeedHelper.from_json({"mine_source": str(tmp_path / "export"),
                                   "fork": {"child_ms": 30000, "hold_stdout": False}})
    scripted.install(tmp_path / "bin", {"journal": str(tmp_path / "journal.jsonl"),
                                        "root": str(tmp_path), "feed": config.to_config()})
    helper = subprocess.Popen([str(tmp_path / "bin" / scripted.FEED_HELPER), "--prepare"],
                              cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    out, _ = helper.communicate(timeout=60)  # the child's stdio is /dev/null: no wait on it
    assert helper.returncode == 0 and out == f"MINE_SOURCE={tmp_path / 'export'}\n"
    [child] = _forked(tmp_path)
    assert child["transport"] == "helper" and child["holds_pipes"] is False
    assert procs.alive(child["pid"]) and os.getpgid(child["pid"]) == helper.pid
    os.killpg(helper.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while procs.alive(child["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.alive(child["pid"])


def test_a_forked_child_holding_stdout_keeps_the_pipe_open_until_it_ends(tmp_path: Path) -> None:
    started = time.monotonic()
    done = run_helper(tmp_path, {"mine_source": None,
                                 "fork": {"child_ms": 800, "hold_stdout": True}})
    assert done.returncode == 0 and len(_forked(tmp_path)) == 1
    assert time.monotonic() - started >= 0.8  # end of file only when the child ended
