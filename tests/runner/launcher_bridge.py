"""A tiny bridge (not the reference) that starts its palace the ways real bridges do.

Usage: ``python launcher_bridge.py WAY...`` with the environment a run gives a bridge. A WAY is

* ``python-m``: ``python3 -m mempalace.mcp_server`` (python3 from PATH, the package from
  PYTHONPATH);
* ``shebang``: finds ``mempalace-mcp`` on PATH, reads its shebang for the Python that has
  mempalace, and runs ``<that python> -m mempalace.mcp_server``;
* ``light``: ``mempalace-light-mcp`` from PATH;
* ``probe``: ``python3 -c "import mempalace"``, printing its ``__version__``.

A server gets ``initialize`` and one ``tools/call``; each way prints one JSON line: ``way``,
``ok``, what the server said (``server_info``, ``tool_text``) or ``version``, else ``error``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from typing import Any

TIMEOUT_S = 30
CALLS = {"light": ("palace_query", {"query": "STATUS"})}


def command(way: str) -> list[str]:
    if way == "python-m":
        return ["python3", "-m", "mempalace.mcp_server"]
    if way == "light":
        return ["mempalace-light-mcp"]
    if way == "probe":
        return ["python3", "-c", "import mempalace; print(mempalace.__version__)"]
    launcher = shutil.which("mempalace-mcp")
    if launcher is None:
        raise FileNotFoundError("mempalace-mcp is not on PATH")
    with open(launcher, encoding="utf-8") as handle:
        first = handle.readline()
    if not first.startswith("#!"):
        raise ValueError(f"{launcher} has no shebang")
    return [first[2:].strip(), "-m", "mempalace.mcp_server"]


def talk(argv: list[str], tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "launcher-bridge", "version": "0"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": tool, "arguments": arguments}},
    ]
    done = subprocess.run(argv, input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if len(answers) != 2:
        tail = done.stderr.strip().splitlines()[-1:] or ["no stderr"]
        return {"ok": False, "error": f"exit {done.returncode}: {tail[0]}"}
    return {"ok": True, "server_info": answers[0]["result"]["serverInfo"],
            "tool_text": answers[1]["result"]["content"][0]["text"]}


def start(way: str) -> dict[str, Any]:
    try:
        argv = command(way)
        if way == "probe":
            done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                                  check=False)
            if done.returncode != 0:
                return {"ok": False, "error": done.stderr.strip().splitlines()[-1]}
            return {"ok": True, "version": done.stdout.strip()}
        tool, arguments = CALLS.get(way, ("mempalace_status", {}))
        return talk(argv, tool, arguments)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    for way in sys.argv[1:]:
        print(json.dumps({"way": way, **start(way)}), flush=True)


if __name__ == "__main__":
    main()
