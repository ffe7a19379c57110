"""A judge written in JavaScript from fixtures/README.md alone agrees with every matcher, check and
expectation case in fixtures/runner-tests/: the docs are enough to port the judge."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from palace_conformance.hosts import node
from palace_conformance.resources import fixtures_dir

SCRIPT = Path(__file__).resolve().parent / "judge_from_docs.mjs"
#: the files the script judges (steps and parity need a whole runner around them)
FILES = ("matchers.json", "checks.json", "expectations.json")


def test_the_judge_written_from_the_docs_passes_every_case(node_hosts: node.Installation) -> None:
    cases = sum(len(group["tests"]) for name in FILES
                for group in json.loads((fixtures_dir() / "runner-tests" / name).read_text()))
    done = subprocess.run([node_hosts.node, str(SCRIPT), str(fixtures_dir() / "runner-tests")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed, 0 failed", summary), summary
    assert summary == f"{cases} passed, 0 failed"
