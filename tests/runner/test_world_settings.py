"""A run's fake settings added after the world is open (a profile's ``PALACE_FAKE_FAULTS_FOR``)
reach a child that gets none of the bridge's environment: they ride in the shim directory's
world file, beside the journal, plan and state."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from palace_conformance.fake.shims import WORLD_FILE
from palace_conformance.runner.execution.world import World

from .support import shipped

SDK_DEFAULT_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def test_faults_for_reaches_a_child_with_the_sdk_default_environment(tmp_path: Path) -> None:
    world = World(shipped("stdio.init.stall-then-tolerant-respawn"), "stdio",
                  work_root=tmp_path).open()
    try:
        world.add_fake_settings({"PALACE_FAKE_FAULTS_FOR": "full"})
        assert world.env["PALACE_FAKE_FAULTS_FOR"] == "full"
        settings = json.loads((world.bin / WORLD_FILE).read_text())["env"]
        assert settings["PALACE_FAKE_FAULTS_FOR"] == "full"
        assert settings["PALACE_FAKE_JOURNAL"] == str(world.journal)  # the others kept
        # the light server, started as such a bridge starts it, takes none of the faults: its
        # first initialize (which the scenario stalls) is answered at once
        env = {k: v for k, v in world.env.items() if k in SDK_DEFAULT_ENV}
        hello = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":'
                 '{"protocolVersion":"2025-06-18","capabilities":{},'
                 '"clientInfo":{"name":"t","version":"1"}}}\n')
        done = subprocess.run([str(world.bin / "mempalace-light-mcp")], input=hello,
                              capture_output=True, text=True, env=env, timeout=30,
                              cwd=world.root)
        assert '"serverInfo"' in done.stdout, done.stderr
        journal = [json.loads(line) for line in world.journal.read_text().splitlines()]
        assert any(r.get("kind") == "process_start" for r in journal)
        assert not any(r.get("kind") == "fault" for r in journal), journal
    finally:
        world.close()
    assert not os.path.exists(world.root) or world.keep
