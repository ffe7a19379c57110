"""Issue 25, item 4: every JUnit XML the kit writes is well-formed XML 1.0, whatever a host
printed (ANSI colours, control characters) or a shard's results hold: parsed here with strict
parsers (``xml.dom.minidom`` and ``xml.etree``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.dom.minidom
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from palace_conformance.runner.reports.junit import write_junit, xml_safe
from palace_conformance.runner.results import (
    NOT_TESTABLE,
    CheckRecord,
    HostInfo,
    RunResult,
    ScenarioResult,
)

HOSTILE = "\x1b[31mred\x1b[0m nul\x00 bell\x07 esc\x1b vt\x0b ff\x0c lone\ud800 fffe\ufffe end"
ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "tests" / "runner" / "scripted_host.py"
CLI = str(Path(sys.executable).with_name("palace-conformance"))
SID = "feed.lock.refused-then-next-trigger-remines"


def strict_parse(path: Path) -> str:
    """Both strict parsers accept the file; its text content."""
    xml.dom.minidom.parse(str(path))
    return "".join(ET.parse(path).getroot().itertext())


def hostile_run() -> RunResult:
    result = ScenarioResult(scenario="x.hostile", transport="stdio", status=NOT_TESTABLE,
                            reason=HOSTILE, host_stderr=HOSTILE, covers=("STDIO-01",))
    result.checks.append(CheckRecord(scenario="x.hostile", transport="stdio", pointer="/setup",
                                     status="fail", message=HOSTILE))
    return RunResult(host=HostInfo(argv=["h"], impl=HOSTILE), results=[result],
                     stale_baseline=[f"x.stale: {HOSTILE}"])


def test_xml_safe_keeps_the_words_and_drops_what_xml_forbids() -> None:
    safe = xml_safe(HOSTILE)
    assert "\x1b" not in safe and "\x00" not in safe and "\ud800" not in safe
    assert safe.startswith("red nul\\x00 bell\\x07") and safe.endswith("end")


def test_run_junit_with_a_hostile_result_parses(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    write_junit(hostile_run(), path)
    text = strict_parse(path)
    assert "red" in text and "\x1b" not in text


def write_shard(tmp_path: Path, shard: str) -> Path:
    out = tmp_path / f"shard-{shard.replace('/', '-')}.json"
    subprocess.run([CLI, "run", "--bridge", f"{sys.executable} {HOST} leak:load stdio,feeding",
                    "--select", SID, "--select", "stdio.*", "--transport", "stdio",
                    "--level", "seed", "--shard", shard, "--json", str(out), "-q"],
                   cwd=tmp_path, capture_output=True, text=True, timeout=300,
                   env={**os.environ, "HOSTILE_JUNIT_TOKEN": "tok-" + "9" * 12})
    return out


@pytest.mark.timeout(600)
def test_every_junit_the_cli_writes_parses(tmp_path: Path) -> None:
    """``run --junit`` under a host whose stderr is coloured, and ``merge --junit`` of shards
    whose messages hold control characters: both parse strictly."""
    run_junit = tmp_path / "run.xml"
    done = subprocess.run([CLI, "run", "--bridge", f"{sys.executable} {HOST} leak:load "
                           "stdio,feeding", "--select", SID, "--transport", "stdio", "--level",
                           "seed", "--junit", str(run_junit), "-q"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert run_junit.exists(), done.stderr
    assert "bridge: crashed" in strict_parse(run_junit)
    shards = [write_shard(tmp_path, "1/2"), write_shard(tmp_path, "2/2")]
    for shard in shards:  # a shard result someone edited: control characters everywhere
        data = json.loads(shard.read_text())
        for result in data["results"]:
            result["reason"] = HOSTILE
            result["title"] = HOSTILE
        shard.write_text(json.dumps(data))
    merged = tmp_path / "merged.xml"
    done = subprocess.run([CLI, "merge", *map(str, shards), "--junit", str(merged), "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert merged.exists(), done.stdout + done.stderr
    assert "red" in strict_parse(merged)
