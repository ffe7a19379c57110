"""The README's two record recipes, run as written: the reference bridge calls tools on the fake
through the recorder (stdio; then HTTP, the fake over HTTP as the palace), the draft validates
and passes on both transports. Then the draft itself: the calls, their stable expectations,
nothing run-specific."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "docs" / "record.md"
#: a minted drawer or diary id, and an ISO timestamp, as values in a draft
MINTED = re.compile(r'"(drawer|diary|entry)_(?!id")[A-Za-z0-9_]+"')
STAMP = re.compile(r'"\d{4}-\d\d-\d\dT')
SECTION = "## Record real traffic as a fixture"
HTTP_SECTION = "## Record an HTTP palace as a fixture"
BIN = Path(sys.executable).parent
SECRET = "rec-s3cr3t-token-value"


def recipe(section: str = SECTION) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(section)
    end = text.index("\n## ", start + len(section))
    blocks = re.findall(r"```sh\n(.*?)```", text[start:end], flags=re.S)
    assert len(blocks) == 1
    return blocks[0]


def run_recipe(section: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The section's block under ``bash -euo pipefail`` in its own process group, which is
    killed whatever happens (a background server must not outlive the test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALACE_", "MEMPALACE_"))}
    env.update(HOME=str(tmp_path), PATH=f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}",
               MY_API_TOKEN=SECRET)
    proc = subprocess.Popen(["bash", "-c", f"set -euo pipefail\n{recipe(section)}"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_the_recipe_records_validates_and_passes_on_both_transports(tmp_path: Path) -> None:
    done = run_recipe(SECTION, tmp_path)
    secret = SECRET
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 scenario(s) valid" in done.stdout
    assert re.search(r"PASS\s+stdio\s+tool\.recorded\.my-session", done.stdout)
    assert re.search(r"PASS\s+http\s+tool\.recorded\.my-session", done.stdout)
    assert "OK: 1 scenario, 3 results: 3 passed" in done.stdout

    text = (tmp_path / "tool.recorded.my-session.json").read_text(encoding="utf-8")
    draft = json.loads(text)
    assert draft["id"] == "tool.recorded.my-session"
    assert [s["op"] for s in draft["steps"][:3]] == ["load", "event", "settle"]
    calls = [s for s in draft["steps"] if s["op"] == "call_tool"]
    assert [c["name"] for c in calls] == ["mempalace_add_drawer", "mempalace_search",
                                          "mempalace_diary_write"]
    assert calls[1]["args"] == {"query": "hello", "limit": 2}
    added = calls[0]["expect"]["result"]
    assert added["is_error"] is False
    assert added["json"] == {"success": True, "wing": "notes", "room": "r", "chunks": 1}
    # the minted drawer id and every timestamp stay out of the matchers (a search hit's keys
    # are there, their volatile values only required to exist)
    assert not MINTED.search(text) and not STAMP.search(text)
    assert str(tmp_path) not in text and secret not in text


def test_the_http_recipe_records_validates_and_passes_on_both_transports(tmp_path: Path) -> None:
    done = run_recipe(HTTP_SECTION, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 scenario(s) valid" in done.stdout
    assert re.search(r"PASS\s+stdio\s+tool\.recorded\.my-remote", done.stdout)
    assert re.search(r"PASS\s+http\s+tool\.recorded\.my-remote", done.stdout)
    assert "OK: 1 scenario, 3 results: 3 passed" in done.stdout
    # the line the recorder printed is what the bridge used: a loopback URL, the palace's path
    printed = (tmp_path / "rec.env").read_text(encoding="utf-8").splitlines()
    assert len(printed) == 1
    assert re.fullmatch(r"export MEMPALACE_REMOTE_URL=http://127\.0\.0\.1:\d+/mcp", printed[0])
    upstream = json.loads((tmp_path / "palace.json").read_text(encoding="utf-8"))["url"]
    assert printed[0].split("=", 1)[1] != upstream

    text = (tmp_path / "tool.recorded.my-remote.json").read_text(encoding="utf-8")
    draft = json.loads(text)
    assert draft["id"] == "tool.recorded.my-remote"
    assert draft["transports"] == ["stdio", "http"]
    calls = [s for s in draft["steps"] if s["op"] == "call_tool"]
    assert [c["name"] for c in calls] == ["mempalace_add_drawer", "mempalace_search"]
    assert calls[0]["args"] == {"wing": "notes", "room": "r", "content": "hello"}
    assert calls[0]["expect"]["result"]["json"] == {"success": True, "wing": "notes",
                                                    "room": "r", "chunks": 1}
    assert calls[1]["expect"]["result"]["json"]["query"] == "hello"
    assert not MINTED.search(text) and not STAMP.search(text)
    assert str(tmp_path) not in text and SECRET not in text
