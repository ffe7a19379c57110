"""Issue 25, item 3: one redactor for every byte that reaches a console.

A host that prints its environment's token in several encodings (plain, base64, URL-encoded,
JSON-escaped, in colour) and a GitHub-shaped token it made up, run through every command that
shows a host's stderr: ``run``, ``replay``, ``diff``, ``matrix``, ``profile init`` and the pytest
plugin (terminal and JUnit). The scan of all their output (and of the report files they write)
finds none of the forms."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "tests" / "runner" / "scripted_host.py"
SID = "feed.lock.refused-then-next-trigger-remines"
TOKEN = 'Sekr/"t+ 8f3a9c1e77d0'
LEAK = f"{sys.executable} {HOST} leak:load stdio,feeding"
CLI = (str(Path(sys.executable).with_name("palace-conformance")),)


def forms() -> list[str]:
    """Every form the host prints the token in, as a scan looks for it (base64 without its
    last characters, which the neighbouring bits share)."""
    return [TOKEN, quote(TOKEN, safe=""), base64.b64encode(TOKEN.encode()).decode()[:-4],
            json.dumps(TOKEN)[1:-1], "8f3a9c1e77d0", "ghp_Zx9Zx9"]


def hits(text: str) -> list[str]:
    return [form for form in forms() if form in text]


def cli(tmp_path: Path, *args: str, timeout: float = 240) -> str:
    env = {**os.environ, "HOSTILE_TEST_TOKEN": TOKEN}
    done = subprocess.run([*CLI, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return done.stdout + done.stderr


def files_text(directory: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in directory.rglob("*") if p.is_file())


@pytest.mark.timeout(600)
def test_no_command_prints_the_hosts_secret(tmp_path: Path) -> None:
    """The secret scan over the console output of every command, and the files they write."""
    reports = tmp_path / "reports"
    outputs = {
        "run": cli(tmp_path, "run", "--bridge", LEAK, "--select", SID, "--transport", "stdio",
                   "--level", "seed", "--report-dir", str(reports), "--junit",
                   str(tmp_path / "run-junit.xml")),
    }
    bundles = sorted((reports / "bundles").iterdir())
    assert bundles, outputs["run"]
    outputs["replay"] = cli(tmp_path, "replay", str(bundles[0]), "--bridge", LEAK,
                            "--level", "seed")
    outputs["diff"] = cli(tmp_path, "diff", "--bridge", LEAK, "--bridge", "reference",
                          "--select", SID, "--transport", "stdio", "--level", "seed")
    outputs["matrix"] = cli(tmp_path, "matrix", "--bridge", LEAK, "--select", SID,
                            "--transport", "stdio", "--level", "seed", "--markdown",
                            str(tmp_path / "matrix.md"))
    outputs["profile init"] = cli(tmp_path, "profile", "init", "--bridge", LEAK, "--transport",
                                  "stdio", "--out", str(tmp_path / "draft.profile.json"))
    env = {**os.environ, "HOSTILE_TEST_TOKEN": TOKEN}
    plugin = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--palace-bridge", LEAK, "--palace-select", SID, "--palace-transport", "stdio",
         "--palace-level", "seed", "--junitxml", str(tmp_path / "plugin-junit.xml"),
         str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    outputs["pytest plugin"] = plugin.stdout + plugin.stderr
    assert "Not testable" in outputs["run"] and "not testable" in outputs["pytest plugin"]
    assert "<redacted-secret-" in outputs["run"]  # the host did print it: it was taken out
    leaks = {name: hits(text) for name, text in outputs.items() if hits(text)}
    assert leaks == {}, leaks
    assert hits(files_text(tmp_path)) == []
