"""The ``mempalace-mcp`` a bridge finds on PATH in a real-server world: a stdio relay to the real
``mempalace-mcp`` that journals what it relays in the fake's format.

The judge reads the fake's journal kinds (``fake/journal.py``), so the relay writes the same ones
for the same wire events: ``process_start`` (its own PID: it is the child the bridge started),
``recv`` for every line the bridge writes (``method``, ``tool``, ``id`` as the fake fills them),
``send`` for every line the server answers, ``signal`` when the bridge signals it (passed on to the
server) and ``process_exit`` with the server's exit code. Lines go through byte for byte.

The real server stays in the relay's process group, and dies with the relay (``PR_SET_PDEATHSIG``
on Linux), so a bridge that SIGKILLs its child, or its child's group, leaves no real server
holding the palace lease. Standard library, the journal module and the recorder's line copying
(``relay/stdio.py``) only: this starts on every spawn, and the real server's own cold start is
slow enough.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from palace_conformance.fake.journal import Journal, start_fields
from palace_conformance.relay.fault_stdio import die_with_parent
from palace_conformance.relay.stdio import lines, write_all
from palace_conformance.relay.zygote import server_environment

#: the relay's configuration, written by the world beside the launcher
CONFIG_NAME = ".real-relay.json"
EXIT_WAIT_S = 10.0  # how long the server may take to exit after EOF or a signal
RAW_KEEP = 4096  # a non-JSON line is journaled up to this many characters, as the fake does


def recv_fields(line: bytes) -> dict[str, Any]:
    """The fields the fake journals for an inbound line (``brain.receive``)."""
    text = line.decode("utf-8", errors="replace")
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return {"raw": text.rstrip("\n")[:RAW_KEEP], "method": None}
    if not isinstance(message, dict):
        return {"message": message, "method": None}
    method = message.get("method") if isinstance(message.get("method"), str) else None
    params = message.get("params")
    tool = (params.get("name") if method == "tools/call" and isinstance(params, dict)
            and isinstance(params.get("name"), str) else None)
    if method is None and ("result" in message or "error" in message):
        return {"message": message, "method": None, "response": True}
    return {"message": message, "method": method, "tool": tool, "id": message.get("id")}


def send_fields(line: bytes) -> dict[str, Any]:
    """The fields the fake journals for an outbound line (``playback.play``'s ``send``)."""
    text = line.decode("utf-8", errors="replace")
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return {"raw": text.rstrip("\n")[:RAW_KEEP], "note": "not JSON", "size": len(line)}
    if not isinstance(message, dict):
        return {"message": message, "method": None, "id": None}
    return {"message": message, "method": message.get("method"), "id": message.get("id")}


class JournalingRelay:
    """One relayed server; :meth:`run` returns the exit code the relay should end with."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.journal = Journal(config["journal"], "stdio")
        self.ended = threading.Event()
        self.reason = "server exited"
        self.signalled: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def _up(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        server_in = proc.stdin.fileno()
        for line in lines(0):
            if line.strip():
                self.journal.record("recv", **recv_fields(line))
            if not write_all(server_in, line):
                break
        else:
            if self.signalled is None:
                self.reason = "stdin EOF"
        with contextlib.suppress(OSError):
            proc.stdin.close()

    def _down(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in lines(proc.stdout.fileno()):
            if line.strip():
                self.journal.record("send", **send_fields(line))
            if not write_all(1, line):
                if self.signalled is None:
                    self.reason = "stdout closed"
                break
        self.ended.set()

    def _on_signal(self, number: int, _frame: object) -> None:
        name = signal.Signals(number).name
        self.signalled = name
        self.reason = name
        self.journal.record("signal", signal=name, action="exit")
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(number)

    def run(self) -> int:
        # the relay is the process the bridge spawned: its creation is the spawn (created_t)
        self.journal.record("process_start", argv=list(sys.argv), **start_fields())
        env = server_environment(self.config, os.environ)
        command = [str(part) for part in self.config["command"]]
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    env=env, bufsize=0, preexec_fn=die_with_parent)
        except OSError as exc:
            print(f"palace-conformance: cannot start the real server {command[0]!r}: {exc}",
                  file=sys.stderr)
            self.journal.record("process_exit", code=127, reason="real server did not start")
            return 127
        self.proc = proc
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(number, self._on_signal)
        threading.Thread(target=self._up, args=(proc,), daemon=True, name="relay-up").start()
        down = threading.Thread(target=self._down, args=(proc,), daemon=True, name="relay-down")
        down.start()
        code = self._wait(proc)
        down.join(1.0)
        self.journal.record("process_exit", code=code, reason=self.reason)
        return code

    def _wait(self, proc: subprocess.Popen[bytes]) -> int:
        """The server's exit code once it ends (it exits on EOF and on SIGTERM); bounded."""
        while not self.ended.wait(0.1):
            if proc.poll() is not None:
                break
        try:
            proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(EXIT_WAIT_S)
        code = proc.returncode
        return code if code >= 0 else 128 - code


def main(config_path: str) -> None:
    """The launcher's entry: read the configuration, relay, exit with the server's code."""
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    code = JournalingRelay(config).run()
    sys.stdout.flush()
    os._exit(code)
