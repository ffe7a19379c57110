"""Seeding a real palace through real tool calls, the only way the real server takes contents.

A scenario's ``palace`` block (diary entries, drawers, events) is filed by a short-lived real
``mempalace-mcp`` on the world's palace before the bridge starts, one ``tools/call`` per item, in
the fixture's order. The real server makes the ids, so an event's ``{"$event_id": LABEL}`` is
remapped to the id the server returned for the event labelled ``LABEL``; ``diary_write`` cannot
take a timestamp (the real server stamps now), so a seeded entry's ``timestamp`` is dropped.

An initialised palace (the fake's default: a chroma database exists, no drawer) is one
``add_drawer`` then ``delete_drawer``: :func:`initialise` makes it once per run in a template
HOME that each world copies (a real server start costs seconds; a copy, milliseconds).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from palace_conformance import processes as procs
from palace_conformance.errors import PalaceError
from palace_conformance.real.install import RealServer
from palace_conformance.scenarios.palace_state import LABEL, resolve_event_ids

REPLY_S = 60.0  # a cold start plus a first vector write on a busy machine stays well inside
EXIT_S = 10.0
#: the palace of a world's HOME: the real server's XDG default (mempalace-3.11 semantics §2)
PALACE_UNDER_HOME = Path(".config") / "mempalace" / "palace"
SEED_AGENT_TOPIC = "general"


class SeedError(PalaceError):
    """The real server refused or failed a seeding call; one line naming the item."""


def palace_of(home: Path) -> Path:
    return home / PALACE_UNDER_HOME


class StdioSession:
    """A real ``mempalace-mcp`` on stdio, asked one request at a time (it serves them so)."""

    def __init__(self, server: RealServer, env: Mapping[str, str]) -> None:
        self.proc = subprocess.Popen(server.stdio_command(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=dict(env), start_new_session=True)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "palace-conformance-seed",
                                                   "version": "1"}})
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _write(self, message: Mapping[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """The ``result`` of one request; :class:`SeedError` on an error or no answer."""
        self.next_id += 1
        self._write({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                     "params": dict(params)})
        assert self.proc.stdout is not None
        deadline = time.monotonic() + REPLY_S
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()  # the server answers in order, one at a time
            if not line:
                raise SeedError(f"the real server exited ({self.proc.poll()}) during {method}")
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if isinstance(answer, dict) and answer.get("id") == self.next_id:
                if "error" in answer:
                    raise SeedError(f"{method} answered {answer['error']}")
                return answer.get("result")
        raise SeedError(f"no answer to {method} within {REPLY_S:.0f} s")

    def tool(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """A tool's JSON result (its text content parsed); :class:`SeedError` when it failed."""
        result = self.request("tools/call", {"name": name, "arguments": dict(arguments)})
        content = (result or {}).get("content") or [{}]
        text = content[0].get("text", "") if isinstance(content[0], dict) else ""
        try:
            payload = json.loads(text)
        except ValueError:
            payload = text
        failed = (result or {}).get("isError") or (isinstance(payload, dict) and (
            payload.get("success") is False or "error" in payload))
        if failed:
            raise SeedError(f"{name} failed: {str(payload)[:200]}")
        return payload

    def close(self) -> None:
        """EOF, then the server exits 0 (1-2 s); its group is killed if it does not."""
        if not procs.ended_by_eof(self.proc, EXIT_S):
            os.killpg(self.proc.pid, 9)
            self.proc.wait(EXIT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def initialise(server: RealServer, env: Mapping[str, str]) -> None:
    """Make the palace of ``env`` initialised and empty: one vector write, deleted again."""
    session = StdioSession(server, env)
    try:
        added = session.tool("mempalace_add_drawer", {
            "wing": "palace_conformance", "room": "setup",
            "content": "palace-conformance initialises this palace"})
        drawer = added.get("drawer_id") if isinstance(added, dict) else None
        if not isinstance(drawer, str):
            raise SeedError(f"add_drawer gave no drawer_id: {str(added)[:200]}")
        session.tool("mempalace_delete_drawer", {"drawer_id": drawer})
    finally:
        session.close()


def seed(server: RealServer, env: Mapping[str, str], diary: Sequence[Mapping[str, Any]],
         drawers: Sequence[Mapping[str, Any]],
         events: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """File the items through real tool calls; returns event label -> real event id."""
    ids: dict[str, str] = {}
    session = StdioSession(server, env)
    try:
        for index, entry in enumerate(diary):
            args = {k: v for k, v in entry.items() if k in ("agent_name", "entry", "topic")}
            _filed(session, "mempalace_diary_write", args, f"palace diary #{index + 1}")
        for index, drawer in enumerate(drawers):
            _filed(session, "mempalace_add_drawer", dict(drawer), f"palace drawer #{index + 1}")
        for index, event in enumerate(events):
            try:
                args = resolve_event_ids({k: v for k, v in event.items() if k != LABEL}, ids)
            except KeyError as exc:
                raise SeedError(f"palace event #{index + 1}: no earlier event labelled "
                                f"{exc.args[0]!r}") from None
            payload = _filed(session, "mempalace_event_append", args,
                             f"palace event #{index + 1}")
            real_id = ((payload.get("event") or {}).get("id")
                       if isinstance(payload, dict) else None)
            if isinstance(event.get(LABEL), str) and isinstance(real_id, str):
                ids[event[LABEL]] = real_id
    finally:
        session.close()
    return ids


def _filed(session: StdioSession, tool: str, args: Mapping[str, Any], what: str) -> Any:
    try:
        return session.tool(tool, args)
    except SeedError as exc:
        raise SeedError(f"{what}: {exc}") from None


def copy_home(template: Path, home: Path) -> None:
    """The template HOME's palace files into ``home`` (which may already exist)."""
    shutil.copytree(template, home, dirs_exist_ok=True, symlinks=True)
