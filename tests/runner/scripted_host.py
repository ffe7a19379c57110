"""A tiny driver host for the runner's tests: speaks DRIVER.md and misbehaves on request.

Usage: ``python scripted_host.py MODE [CAPS]`` where MODE is one of

* ``good``: answers every op with ``ok`` (no bridge at all);
* ``silent:OP``: never answers OP (and stays alive);
* ``slow-start:FILE``: the first host started with FILE absent creates it and never answers
  ``hello`` (a host slowed down by a loaded machine); a later one behaves as ``good``;
* ``garbage:OP``: writes a non-JSON line instead of the reply to OP;
* ``stray:OP``: answers OP, then writes an extra line nobody asked for;
* ``wrong-id:OP``: answers OP with another id;
* ``crash:OP``: writes a line to stderr and exits 3 when OP arrives;
* ``longline:OP``: writes :data:`LONG_LINE_BYTES` bytes to stdout with no newline instead of the
  reply to OP, then stays alive;
* ``loaddaemon:PIDFILE``: on ``load``, starts a sleeper as a bridge starts its palace (with the
  environment ``load`` gave it), detached (``setsid``, stdio on ``/dev/null``), and appends its
  pid to PIDFILE;
* ``stderrflood:OP``: writes :data:`FLOOD_LINES` numbered lines to stderr, then answers OP;
* ``version:N``: ``hello`` says protocol N;
* ``fail-load``: ``load`` answers ``ok: false`` (kind exception);
* ``no-reload``: like ``good``, but ``reload`` is an op it does not serve (``bad_request``, as
  a host whose bridge is no pi extension answers);
* ``no-concurrency``: like ``good``, but ``call_tools`` is an op it does not know
  (``bad_request``, as a host that predates the op answers);
* ``no-abandon``: like ``good``, but ``abandon`` is an op it does not know (``bad_request``, as
  a host that predates the op answers);
* ``linger:MS``: like ``good``, but after answering ``exit`` it stays alive MS milliseconds
  before it exits;
* ``leak:OP``: when OP arrives, writes every secret-named variable of its environment to
  stderr (plain, base64, URL- and JSON-encoded, in colour) and exits 3;
* ``tamper:MARKER``: on ``load``, overwrites the run's ``bin/mempalace-mcp`` with a script that
  touches MARKER (a writer that got past the path policy), then answers as ``good``;
* ``no-palace:WHERE``: like ``good`` (it never starts a palace), but ``load`` says why: WHERE is
  ``effects`` (a ``stderr`` and a ``notify`` effect) or ``stderr`` (lines on the host's stderr);

and CAPS is a comma-separated capability list for ``hello`` (default ``stdio,http``);
``default:CAPS`` marks the list as a placeholder (``capabilities_source: "default"``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

NO_PALACE = "spawn mempalace-mcp ENOENT"
LONG_LINE_BYTES = 8 * 1024 * 1024
FLOOD_LINES = 100_000  # "stderr line 000000\n": 19 bytes each


def reply(request_id: object, result: object = None, ok: bool = True,
          error: dict[str, object] | None = None,
          effects: list[dict[str, object]] | None = None) -> None:
    message: dict[str, object] = {"id": request_id, "ok": ok, "effects": effects or [],
                                  "ms": 0.1}
    if ok:
        message["result"] = result
    else:
        message["error"] = error or {"kind": "exception", "message": "scripted"}
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def leaked(environ: dict[str, str] | os._Environ[str]) -> str:
    """``leak:OP``'s stderr: each secret-named variable as written, base64, URL- and
    JSON-encoded, with ANSI colour, plus a GitHub-shaped token it made up."""
    import base64
    from urllib.parse import quote

    parts = ["\x1b[31mbridge: crashed\x1b[0m", "ghp_" + "Zx9" * 12]
    for name, value in sorted(environ.items()):
        if any(word in name for word in ("TOKEN", "SECRET", "KEY")) and len(value) >= 8:
            parts += [f"{name}={value}", base64.b64encode(value.encode()).decode(),
                      quote(value, safe=""), json.dumps({"token": value})]
    return " | ".join(parts)


def main() -> None:
    mode, _, target = sys.argv[1].partition(":")
    listed = sys.argv[2] if len(sys.argv) > 2 else "stdio,http"
    placeholder = listed.startswith("default:")
    caps = listed.removeprefix("default:").split(",")
    if mode == "slow-start":
        marker = Path(target)
        mode, target = ("silent", "hello") if not marker.exists() else ("good", "")
        marker.touch()
    for line in sys.stdin:
        request = json.loads(line)
        op, request_id = request.get("op"), request.get("id")
        if target == op or (mode == "version" and op == "hello"):
            if mode == "silent":
                time.sleep(3600)
            if mode == "garbage":
                sys.stdout.write("this is not JSON\n")
                sys.stdout.flush()
                continue
            if mode == "longline":
                for _ in range(LONG_LINE_BYTES // 65536):
                    sys.stdout.write("x" * 65536)
                sys.stdout.flush()
                time.sleep(3600)
            if mode == "stderrflood":
                sys.stderr.writelines(f"stderr line {n:06d}\n" for n in range(FLOOD_LINES))
                sys.stderr.flush()
            if mode == "leak":  # every secret of its environment, in several encodings
                sys.stderr.write(leaked(os.environ) + "\n")
                sys.stderr.flush()
                sys.exit(3)
            if mode == "crash":
                sys.stderr.write(f"scripted host: crashing on {op}\n")
                sys.stderr.flush()
                sys.exit(3)
            if mode == "wrong-id":
                reply(request_id + 100)
                continue
        if mode == "loaddaemon" and op == "load":
            sleeper = subprocess.Popen(["sleep", "600"], env=request["env"], start_new_session=True,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            with open(target, "a", encoding="ascii") as handle:
                handle.write(f"{sleeper.pid}\n")
        if mode == "tamper" and op == "load":  # a writer that got past the path policy
            shim = os.path.join(request.get("cwd") or os.getcwd(), "bin", "mempalace-mcp")
            with contextlib.suppress(OSError):
                os.chmod(os.path.dirname(shim), 0o755)
                os.chmod(shim, 0o755)
            with open(shim, "w", encoding="ascii") as handle:
                handle.write(f"#!/bin/sh\ntouch {target}\n")
        if op == "hello":
            protocol = int(target) if mode == "version" else 1
            reply(request_id, {"protocol": protocol, "impl": "scripted", "bridge": "none",
                               "runtime": "python", "capabilities": caps,
                               **({"capabilities_source": "default"} if placeholder else {})})
        elif op == "load" and mode == "fail-load":
            reply(request_id, ok=False, error={"kind": "exception", "message": "cannot load"})
        elif op == "reload" and mode == "no-reload":
            reply(request_id, ok=False, error={"kind": "bad_request",
                                               "message": "this bridge is not a pi extension"})
        elif op == "call_tools" and mode == "no-concurrency":
            reply(request_id, ok=False, error={"kind": "bad_request",
                                               "message": "unknown op 'call_tools'"})
        elif op == "load" and mode == "no-palace" and target == "effects":
            reply(request_id, effects=[
                {"kind": "stderr", "line": f"[mempalace] {NO_PALACE}"},
                {"kind": "notify", "level": "warning", "message": "MemPalace unavailable"}])
        elif op == "load" and mode == "no-palace":
            sys.stderr.write(f"bridge: loading\nbridge: {NO_PALACE}\n")
            sys.stderr.flush()
            reply(request_id)
        elif op == "list_tools":
            reply(request_id, [])
        elif op == "abandon" and mode == "no-abandon":
            reply(request_id, ok=False, error={"kind": "bad_request",
                                               "message": "unknown op 'abandon'"})
        elif op in ("exit", "abandon"):
            reply(request_id)
            if mode == "linger":
                time.sleep(int(target) / 1000)
            return
        else:
            reply(request_id)
        if mode == "stray" and target == op:
            sys.stdout.write(json.dumps({"id": 999, "ok": True}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
