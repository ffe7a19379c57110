"""The README's "Record real traffic as a fixture" recipe, run as written: the reference bridge
calls three tools on the fake through the recorder, the draft validates and passes on both
transports. Then the draft itself: the calls, their stable expectations, nothing run-specific."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Record real traffic as a fixture"
BIN = Path(sys.executable).parent


def recipe() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks = re.findall(r"```sh\n(.*?)```", text[start:end], flags=re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_the_recipe_records_validates_and_passes_on_both_transports(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALACE_", "MEMPALACE_"))}
    secret = "rec-s3cr3t-token-value"
    env.update(HOME=str(tmp_path), PATH=f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}",
               MY_API_TOKEN=secret)
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\n{recipe()}"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 scenario(s) valid" in done.stdout
    assert re.search(r"PASS\s+stdio\s+tool\.recorded\.my-session", done.stdout)
    assert re.search(r"PASS\s+http\s+tool\.recorded\.my-session", done.stdout)
    assert "OK: 1 scenario(s), 3 result(s): 3 passed" in done.stdout

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
    # the minted drawer id and every timestamp stay out of the matchers
    assert "drawer_id" not in text and "entry_id" not in text and "timestamp" not in text
    assert str(tmp_path) not in text and secret not in text
