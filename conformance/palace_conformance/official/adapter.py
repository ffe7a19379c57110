"""The client adapter the official suite runs (``python -m palace_conformance.official.adapter
URL``).

The suite starts a scenario server, then runs ``--command`` through a shell with the server's URL
appended and ``MCP_CONFORMANCE_SCENARIO`` set. This adapter points the reference bridge at that URL
(``MEMPALACE_REMOTE_URL``, no token, debug lines on stderr, which the suite keeps as
``stderr.txt``) and *replaces itself* with ``palace-bridge``, which connects, lists the tools and
calls the one tool the scenario checks for. ``exec``: when the suite's timeout kills the process it
started, no orphan keeps the suite's pipes open.
"""

from __future__ import annotations

import json
import os
import sys

#: scenario -> (tool, arguments) the scenario server checks for; absent: list the tools only
CALLS: dict[str, tuple[str, dict[str, object]]] = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}
#: the bridge's per-call timeout: under the suite's own 30 s default, so the bridge gives up first
CALL_TIMEOUT_MS = "15000"


def bridge_argv(scenario: str) -> list[str]:
    """The ``palace-bridge`` arguments for one scenario (after the program)."""
    call = CALLS.get(scenario)
    if call is None:
        return ["tools"]
    tool, arguments = call
    return ["call", tool, json.dumps(arguments)]


def bridge_env(url: str, base: dict[str, str]) -> dict[str, str]:
    """The bridge's environment: the scenario server as the remote palace, nothing inherited that
    could point it elsewhere (another ``MEMPALACE_*``) or authenticate it."""
    env = {k: v for k, v in base.items() if not k.startswith("MEMPALACE_")}
    env.update({"MEMPALACE_REMOTE_URL": url, "MEMPALACE_EXT_DEBUG": "1",
                "MEMPALACE_MCP_TIMEOUT_MS": base.get("MEMPALACE_MCP_TIMEOUT_MS", CALL_TIMEOUT_MS),
                "MEMPALACE_FEED": "0"})
    return env


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("palace-conformance official adapter: expected the scenario server's URL as the "
              "last argument (the suite appends it)", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    env = bridge_env(args[-1], dict(os.environ))
    program = [sys.executable, "-m", "palace_bridge.cli", *bridge_argv(scenario)]
    sys.stdout.flush()
    os.execve(sys.executable, program, env)
    return 0  # not reached: execve replaces this process


if __name__ == "__main__":
    raise SystemExit(main())
