"""The bare fake (``palace-fake-mcp`` started by hand: no state file, only a HOME) starts as the
real mempalace 3.11 starts in that HOME: its first answers in a new HOME, where there is no
palace on disk, equal the real server's through the fidelity normaliser; and where the real
server has made a palace, the fake started on it reads it as initialised."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.fake.disk_state import state_on_disk
from palace_conformance.fidelity.normalise import load_rules, normalise
from palace_conformance.real import embedding, install

KIT = Path(__file__).resolve().parents[2]
INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {},
              "clientInfo": {"name": "bare-fake-test", "version": "1"}}
#: the first calls of a session, as a harness starting a palace by hand would make them
FIRST_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("mempalace_status", {}),
    ("mempalace_list_wings", {}),
    ("mempalace_list_drawers", {}),
    ("mempalace_get_taxonomy", {}),
    ("mempalace_search", {"query": "anything"}),
    ("mempalace_kg_stats", {}),
    ("mempalace_diary_read", {"agent_name": "claude"}),
]
STEP_S = 120.0  # one answer, cold start included, on a loaded machine


def _session(argv: list[str], env: dict[str, str]) -> list[Any]:
    """Each first call's answer (its error, or its result's parsed text and isError)."""
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE},
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": n, "method": "tools/call",
               "params": {"name": name, "arguments": args}}
              for n, (name, args) in enumerate(FIRST_CALLS, 1)]
    stdin = "".join(json.dumps(m) + "\n" for m in lines)
    done = subprocess.run(argv, input=stdin.encode(), capture_output=True, env=env,
                          timeout=STEP_S, check=False)
    replies = {m.get("id"): m for m in map(json.loads, done.stdout.decode().splitlines())}
    answers: list[Any] = []
    for n in range(1, len(FIRST_CALLS) + 1):
        reply = replies[n]
        if "error" in reply:
            answers.append({"error": reply["error"]})
            continue
        result = reply["result"]
        text = result["content"][0]["text"]
        try:
            body: Any = json.loads(text)
        except ValueError:
            body = text
        answers.append({"is_error": bool(result.get("isError")), "body": body})
    return answers


def _fake_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_FAKE_", "MEMPALACE_", "MEMPAL_", "XDG_"))}
    env.update({"HOME": str(home), "PYTHONPATH": f"{KIT / 'conformance'}"})
    return env


FAKE = [sys.executable, "-c", "from palace_conformance.fake.cli import fake_mcp_main; "
        "fake_mcp_main()"]


@pytest.mark.real_palace
def test_the_bare_fake_answers_a_new_home_as_the_real_server_does(tmp_path: Path) -> None:
    server = install.locate(None)
    real_home, fake_home = tmp_path / "real" / "home", tmp_path / "fake" / "home"
    real_home.mkdir(parents=True)
    fake_home.mkdir(parents=True)
    with embedding.running_stub() as url:
        real_env = install.isolated_environment(real_home, None, embedding.environment(url))
        real = _session(server.stdio_command(), real_env)
    fake = _session(FAKE, _fake_env(fake_home))
    rules = load_rules()
    for (name, _), real_answer, fake_answer in zip(FIRST_CALLS, real, fake, strict=True):
        left, _ = normalise(real_answer, rules, {"<HOME>": str(real_home)})
        right, _ = normalise(fake_answer, rules, {"<HOME>": str(fake_home)})
        assert left == right, (name, real_answer, fake_answer)
    # the new HOME really is palace-less: the first answer says so on both
    assert "error" in json.dumps(real[0]).lower() or real[0].get("is_error"), real[0]


def test_the_start_state_is_read_off_the_disk(tmp_path: Path) -> None:
    palace = tmp_path / "palace"
    assert state_on_disk(str(palace)) == {"initialised": False, "directory": False}
    palace.mkdir()
    assert state_on_disk(str(palace)) == {"initialised": False, "directory": True}
    import sqlite3

    database = sqlite3.connect(palace / "chroma.sqlite3")
    database.execute("CREATE TABLE collections (name TEXT)")
    database.commit()
    assert state_on_disk(str(palace))["bare_database"] is True  # made, no drawers collection
    database.execute("INSERT INTO collections VALUES ('mempalace_drawers')")
    database.commit()
    database.close()
    assert state_on_disk(str(palace)) == {"initialised": True}
