"""What the extension host observes for ``profile init`` (DRIVER.md ``introspect.observed``):
the names a bridge reads, the files under HOME it looks for, the programs it tries to start;
never a value, never a file outside HOME, never Node's or the host's own reads."""

from __future__ import annotations

import json
from pathlib import Path

from .support import EXTENSIONS, host, palace

SECRET = "observed-secret-value-4711"


def test_the_extension_host_reports_names_and_paths_never_values(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(f"pi-extension:{EXTENSIONS / 'observed.ts'}", tmp_path / "host") as h:
        env = fake.bridge_env(OBSERVED_TOOL_TIMEOUT_MS=SECRET, OBSERVED_FLAG="1")
        h.start_session(env, tmp_path)
        reply = h.ok("introspect")
    observed = reply.result["observed"]
    # by name and by `in`; the {...process.env} copy and Node's own reads in spawn are no reads
    assert observed["env_reads"] == ["OBSERVED_FLAG", "OBSERVED_TOOL_TIMEOUT_MS"]
    assert observed["files"] == [
        {"path": ".config/observed/settings.json", "ops": ["read"]},
        {"path": ".observed-token", "ops": ["exists"]},
        {"path": ".observedrc", "ops": ["stat"]},
    ]
    spawned = observed["spawned"]
    assert {"argv": ["observed-no-such-palace-mcp"], "error": "ENOENT"} in spawned
    assert {"argv": ["observed-no-such-helper", "--probe"], "error": "ENOENT"} in spawned
    assert {"argv": ["true"]} in spawned
    assert SECRET not in json.dumps(reply.result)
