"""A driver host for the settle tests: a "bridge" whose work lands *later*, on a timer, out of
reach of the host's own settle drain (as untracked background work would).

Usage: ``python timed_host.py LOG [OPTION ...]``; every request is appended to LOG as one JSON
line. Options, each armed by the ``session_start`` event:

* ``tools-after:MS:A,B``: register tools A and B (``tool_registered`` effects) MS later;
* ``journal-after:MS:KIND``: append ``{"kind": KIND}`` to the run's journal MS later;
* ``notify-after:MS``: one ``notify`` effect MS later;
* ``notify-every:MS``: a ``notify`` effect every MS, for ever;
* ``quiet-from-call``: ``settle`` counts its quiet period from the later of the last effect and
  the request (as the Node hosts' recorder does), not from the last effect alone.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

LOCK = threading.Lock()
EFFECTS: list[dict[str, Any]] = []
TOOLS: list[str] = []
STATE = {"reported": 0, "last_effect": time.monotonic(), "journal": ""}


def record(effect: dict[str, Any]) -> None:
    with LOCK:
        EFFECTS.append(effect)
        STATE["last_effect"] = time.monotonic()


def later(ms: float, action: Any) -> None:
    timer = threading.Timer(ms / 1000.0, action)
    timer.daemon = True
    timer.start()


def arm(options: list[str]) -> None:
    for option in options:
        kind, _, rest = option.partition(":")
        if kind == "tools-after":
            ms, _, names = rest.partition(":")

            def register(names: str = names) -> None:
                for name in names.split(","):
                    with LOCK:
                        TOOLS.append(name)
                    record({"kind": "tool_registered", "name": name, "description": "",
                            "parameters": {"type": "object"}})

            later(float(ms), register)
        elif kind == "journal-after":
            ms, _, what = rest.partition(":")

            def write(what: str = what) -> None:
                with open(STATE["journal"], "a", encoding="utf-8") as handle:
                    handle.write(json.dumps({"kind": what, "t": time.time()}) + "\n")

            later(float(ms), write)
        elif kind == "notify-after":
            later(float(rest), lambda: record({"kind": "notify", "level": "info",
                                                "message": "once"}))
        elif kind == "notify-every":
            every = float(rest)

            def tick(every: float = every) -> None:
                while True:
                    time.sleep(every / 1000.0)
                    record({"kind": "notify", "level": "info", "message": "tick"})

            threading.Thread(target=tick, daemon=True).start()


def settle(request: dict[str, Any], from_call: bool) -> None:
    quiet = float(request.get("quiet_ms", 200)) / 1000.0
    started = time.monotonic()
    deadline = started + float(request.get("max_ms", 5000)) / 1000.0
    while time.monotonic() < deadline:
        with LOCK:
            last = STATE["last_effect"]
        if time.monotonic() - (max(last, started) if from_call else last) >= quiet:
            return
        time.sleep(0.005)


def main() -> None:
    log_path, options = sys.argv[1], sys.argv[2:]
    from_call = "quiet-from-call" in options
    for line in sys.stdin:
        request = json.loads(line)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(request) + "\n")
        started = time.monotonic()
        op = request.get("op")
        result: Any = None
        if op == "hello":
            result = {"protocol": 1, "impl": "timed", "bridge": "none", "runtime": "python",
                      "capabilities": ["stdio", "http"]}
        elif op == "load":
            STATE["journal"] = str((request.get("env") or {}).get("PALACE_FAKE_JOURNAL", ""))
        elif op == "event" and request.get("name") == "session_start":
            arm(options)
        elif op == "settle":
            settle(request, from_call)
        elif op == "list_tools":
            with LOCK:
                result = [{"name": n, "description": "", "parameters": {"type": "object"}}
                          for n in TOOLS]
        with LOCK:
            fresh = EFFECTS[STATE["reported"]:]
            STATE["reported"] = len(EFFECTS)
        reply = {"id": request.get("id"), "ok": True, "result": result, "effects": fresh,
                 "ms": (time.monotonic() - started) * 1000.0}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
        if op == "exit":
            return


if __name__ == "__main__":
    main()
