"""The fake HTTP server's control API, under ``/_fake/`` on the MCP port (off with --no-control).

A runner uses it to steer a live fake without restarting it, so a bridge keeps its connection
state while the palace changes behaviour. It needs no token, but the Host and Origin checks still
apply. Every call is journaled as one ``control`` record (never the token itself).

=======  ========================  ===========================================================
method   path                      effect
=======  ========================  ===========================================================
POST     /_fake/faults             arm a fault object, a list of them, or a plan
                                   (``{"faults": [...]}``); same schema as plan files. Armed
                                   faults count only messages that arrive after arming.
                                   200 ``{"armed": [ids]}``; 400 ``{"error": "..."}``
DELETE   /_fake/faults             disarm every fault; 200 ``{"cleared": n}``
POST     /_fake/sessions/forget    forget every session, or ``{"id": ...}`` only that one;
                                   200 ``{"forgotten": [ids]}``; 404 for an unknown id
POST     /_fake/token              ``{"token": "..."}`` (or null for none) replaces the token
GET      /_fake/journal            200 with the journal records as a JSON array, streamed
                                   (a memory journal's ``X-Fake-Journal-Dropped`` header counts
                                   the records its ring no longer holds)
POST     /_fake/reset              disarm faults, forget sessions, empty the palace
=======  ========================  ===========================================================
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from palace_conformance.errors import UntrustedInputError
from palace_conformance.fake.brain import Brain
from palace_conformance.fake.faults import STARTUP, FaultPlanError, check_targets, fault_from_json
from palace_conformance.fake.journal import Journal, encode_record
from palace_conformance.fake.palace import PalaceState
from palace_conformance.fake.sessions import SessionTable

PREFIX = "/_fake/"
Answer = tuple[int, Any]
JOURNAL_CHUNK = 1024 * 1024  # bytes of journal file read (and answered) at a time
DROPPED_HEADER = "X-Fake-Journal-Dropped"


class JournalBody:
    """The ``GET /_fake/journal`` answer, made in pieces (:meth:`pieces`, run off the event
    loop) so that a large journal is neither held whole nor blocks the fake's other clients.

    It is the journal as it stood when the call arrived: a file up to its size then (the call's
    own ``control`` record comes after), a memory journal's ring as copied then."""

    def __init__(self, journal: Journal) -> None:
        self.path = journal.path
        self.size = (os.path.getsize(self.path)
                     if self.path is not None and os.path.exists(self.path) else 0)
        self.memory: list[dict[str, Any]] = []
        self.dropped = 0
        if self.path is None:
            with journal.exclusive():  # the ring, as one consistent copy
                self.memory, self.dropped = list(journal.memory), journal.dropped

    def pieces(self) -> Iterator[bytes]:
        """``[``, the records' lines joined by commas (a torn or unreadable line skipped, as
        :func:`read_journal` does), ``]``."""
        yield b"["
        first = True
        for batch in self._line_batches():
            if batch:
                yield (b"" if first else b",") + b",".join(batch)
                first = False
        yield b"]"

    def _line_batches(self) -> Iterator[list[bytes]]:
        if self.path is None:
            for start in range(0, len(self.memory), 1000):
                yield [encode_record(r) for r in self.memory[start:start + 1000]]
            return
        with open(self.path, "rb") as handle:
            left, pending = self.size, b""
            while left > 0 and (chunk := handle.read(min(JOURNAL_CHUNK, left))):
                left -= len(chunk)
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                yield [line for line in lines if _whole(line)]
            if _whole(pending):
                yield [pending]


def _whole(line: bytes) -> bool:
    """Whether a journal line is one whole record (a killed writer can leave a torn one)."""
    if not line.strip():
        return False
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


class ControlError(UntrustedInputError):
    """A control call that cannot be carried out; the message is the one-line answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ControlledServer(Protocol):
    """What the control API changes on the server it is part of."""

    brain: Brain
    sessions: SessionTable
    token: str | None


class ControlApi:
    """Routes ``/_fake/`` calls to the server's brain, sessions and token."""

    def __init__(self, server: ControlledServer) -> None:
        self.server = server
        self.armed = 0
        self.routes: dict[tuple[str, str], Callable[[Any], Answer]] = {
            ("POST", "faults"): self.arm_faults,
            ("DELETE", "faults"): self.clear_faults,
            ("POST", "sessions/forget"): self.forget_sessions,
            ("POST", "token"): self.set_token,
            ("GET", "journal"): self.journal,
            ("POST", "reset"): self.reset,
        }

    def handle(self, method: str, path: str, body: bytes) -> Answer:
        """(status, JSON payload) for one control call."""
        name = path[len(PREFIX):].strip("/")
        route = self.routes.get((method, name))
        if route is None:
            if any(key[1] == name for key in self.routes):
                return 405, {"error": f"{method} is not allowed on {path}"}
            return 404, {"error": f"no control endpoint {path}; see docs/fake-control-api.md"}
        try:
            data = json.loads(body) if body.strip() else None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return 400, {"error": f"control body is not JSON ({exc})"}
        except (ValueError, RecursionError):
            return 400, {"error": "control body is not JSON the fake can decode (nested too "
                                  "deeply or too long a number)"}
        try:
            return route(data)
        except ControlError as exc:
            return exc.status, {"error": str(exc)}

    # -- endpoints --------------------------------------------------------------------------

    def arm_faults(self, data: Any) -> Answer:
        if isinstance(data, dict) and "action" not in data and isinstance(data.get("faults"), list):
            data = data["faults"]
        items = data if isinstance(data, list) else [data]
        brain = self.server.brain
        taken = {fault.id for fault, _ in brain.faults}
        faults = []
        for index, item in enumerate(items):
            if isinstance(item, dict) and "id" not in item:
                self.armed += 1
                item = {**item, "id": f"ctl-{self.armed}-{item.get('action', 'fault')}"}
            try:
                fault = fault_from_json(item, index)
                check_targets(fault, f"fault {index}")
            except FaultPlanError as exc:
                raise ControlError(400, str(exc)) from None
            if fault.id in taken:
                raise ControlError(400, f"fault id {fault.id!r} is already armed; pick another id "
                                   "or DELETE /_fake/faults first")
            if fault.on.method == STARTUP:
                raise ControlError(400, f"fault {fault.id!r}: $startup faults only work in a "
                                   "plan given at start-up (--plan/--fault)")
            if fault.on.transport == "stdio":
                raise ControlError(400, f"fault {fault.id!r} is for stdio; this server is HTTP")
            taken.add(fault.id)
            faults.append(fault)
        for fault in faults:
            brain.arm(fault)
        return 200, {"armed": [fault.id for fault in faults]}

    def clear_faults(self, data: Any) -> Answer:
        count = len(self.server.brain.faults)
        self.server.brain.clear_faults()
        return 200, {"cleared": count}

    def forget_sessions(self, data: Any) -> Answer:
        sessions = self.server.sessions
        if isinstance(data, dict) and data.get("id") is not None:
            session_id = str(data["id"])
            if not sessions.forget(session_id):
                raise ControlError(404, f"no live session {session_id!r}")
            return 200, {"forgotten": [session_id]}
        return 200, {"forgotten": sessions.forget_all()}

    def set_token(self, data: Any) -> Answer:
        if not isinstance(data, dict) or "token" not in data:
            raise ControlError(400, 'expected {"token": "..."} (or {"token": null} for no token)')
        token = data["token"]
        if token is not None and (not isinstance(token, str) or not token):
            raise ControlError(400, "'token' must be a non-empty string or null")
        self.server.token = token
        return 200, {"auth": token is not None}

    def journal(self, data: Any) -> Answer:
        return 200, JournalBody(self.server.brain.journal)

    def reset(self, data: Any) -> Answer:
        server = self.server
        server.brain.clear_faults()
        forgotten = server.sessions.forget_all()
        store = server.brain.store
        with store.transaction(write=True):
            store.state = PalaceState()
        return 200, {"reset": True, "forgotten": forgotten}
