"""The mempalace-pi-session stand-in, run through its install-shim wrapper like a bridge would."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from palace_conformance.fake.journal import read_journal
from palace_conformance.fake.shims import install_shim


def run(tmp: Path, *args: str, timeout: float = 20, **env: str) -> subprocess.CompletedProcess:
    install_shim(tmp / "bin")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PALACE_", "MEMPALACE_"))}
    base.update(HOME=str(tmp), PALACE_FAKE_JOURNAL=str(tmp / "journal.jsonl"), **env)
    return subprocess.run([str(tmp / "bin" / "mempalace-pi-session"), *args], env=base,
                          capture_output=True, text=True, timeout=timeout)


def prepares(tmp: Path) -> list[dict]:
    return [r for r in read_journal(tmp / "journal.jsonl") if r["kind"] == "feed_prepare"]


PREPARE = ("--prepare", "--reason", "session_shutdown", "--wing", "wing_w")


def test_source_mode_stages_a_transcript_and_records_the_call(tmp_path: Path) -> None:
    done = run(tmp_path, *PREPARE, MEMPALACE_REMOTE_TOKEN="s3cret", MEMPALACE_PI_DEVICE="box")
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith("MINE_SOURCE=")
    source = Path(line.removeprefix("MINE_SOURCE="))
    # a directory, as mempalace 3.11's mine wants one (a single file only with mode convos)
    [staged] = source.iterdir()
    assert source.is_dir() and "session_shutdown" in staged.read_text()
    [record] = prepares(tmp_path)
    assert record["argv"] == [str(tmp_path / "bin" / "mempalace-pi-session"), *PREPARE]
    assert record["env"]["MEMPALACE_PI_DEVICE"] == "box"
    assert record["env"]["MEMPALACE_REMOTE_TOKEN"] == "<redacted>"
    assert "s3cret" not in (tmp_path / "journal.jsonl").read_text()


def test_none_mode_prints_nothing(tmp_path: Path) -> None:
    done = run(tmp_path, *PREPARE, PALACE_FEED_MODE="none")
    assert done.returncode == 0 and done.stdout == ""
    assert len(prepares(tmp_path)) == 1


def test_fail_mode_exits_non_zero_with_one_line(tmp_path: Path) -> None:
    done = run(tmp_path, *PREPARE, PALACE_FEED_MODE="fail", PALACE_FEED_EXIT="7")
    assert done.returncode == 7 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1


def test_hang_mode_hangs_after_recording(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        run(tmp_path, *PREPARE, PALACE_FEED_MODE="hang", timeout=1.0)
    assert len(prepares(tmp_path)) == 1


def test_plan_steps_follow_the_invocation_count(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(["none", {"mode": "source", "delay_ms": 200}]))
    outputs = []
    for _ in range(3):
        started = time.monotonic()
        done = run(tmp_path, *PREPARE, "--plan", str(plan))
        outputs.append((done.stdout.startswith("MINE_SOURCE="), time.monotonic() - started))
    assert [has for has, _ in outputs] == [False, True, True]  # the last step repeats
    assert outputs[1][1] >= 0.2
    assert [r["invocation"] for r in prepares(tmp_path)] == [0, 1, 2]


@pytest.mark.parametrize(("args", "env", "needle"), [
    (("--reason", "x"), {}, "--prepare"),
    (PREPARE, {"PALACE_FEED_MODE": "explode"}, "unknown mode"),
    (PREPARE, {"PALACE_FEED_PLAN": "/nonexistent/plan.json"}, "cannot read plan"),
    (PREPARE, {"PALACE_FEED_DELAY_MS": "soon"}, "integer"),
])
def test_mistakes_are_one_line_and_still_recorded(tmp_path: Path, args: tuple, env: dict,
                                                  needle: str) -> None:
    done = run(tmp_path, *args, **env)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and needle in done.stderr
    assert "Traceback" not in done.stderr
    assert len(prepares(tmp_path)) == 1
