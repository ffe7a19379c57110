"""The one brain of the fake: JSON-RPC dispatch as mempalace 3.11.0 does it, plus fault matching.

Both transports hand every inbound message to :meth:`Brain.receive` and play the returned
:class:`Exchange` (see ``playback``). The brain never sleeps or writes bytes itself; it decides.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..resources import tool_catalogue
from .faults import STARTUP, Fault, FaultPlan
from .journal import Journal, JournalTail
from .lease import Contention, Lease
from .palace import VERSION, PalaceStore, ToolFailure, run_tool

PEER_WRITER_MESSAGE = "Peer MCP writer active; this server is read-only for mutating tools"


def rpc_error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def rpc_result(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def tool_result(payload: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(payload, indent=2, ensure_ascii=False)}]}


@dataclass
class Exchange:
    """One inbound message, the faults it fired, and (lazily) the reply the palace gives."""

    message: dict[str, Any] | None
    kind: str  # request | notification | response | invalid
    faults: list[Fault] = field(default_factory=list)
    compute: Callable[[], dict[str, Any] | None] = lambda: None
    hold_seconds: float = 0.0
    _reply: dict[str, Any] | None = None
    _computed: bool = False

    @property
    def method(self) -> str | None:
        return self.message.get("method") if self.message else None

    @property
    def request_id(self) -> Any:
        return self.message.get("id") if self.message else None

    def fault(self, action: str) -> Fault | None:
        return next((f for f in self.faults if f.action == action), None)

    def reply(self) -> dict[str, Any] | None:
        """The palace's answer; tool side effects happen here, only if a reply is due."""
        if not self._computed:
            self._reply = self.compute()
            self._computed = True
        return self._reply


class OccurrenceIndex:
    """Counts matching messages across all processes of a scenario by tailing the journal."""

    def __init__(self, journal: Journal) -> None:
        self.tail = JournalTail(journal)
        self.seen: list[tuple[str | None, str | None, str]] = []
        self.starts = 0

    def refresh(self) -> None:
        for record in self.tail.new_records():
            if record.get("kind") == "process_start":
                self.starts += 1
            elif record.get("kind") == "recv" and record.get("method") is not None:
                self.seen.append((record.get("method"), record.get("tool"), record["transport"]))

    def count(self, fault: Fault) -> int:
        if fault.on.method == STARTUP:
            return self.starts
        return sum(1 for m, t, tr in self.seen if fault.on.selects(m, t, tr))


class Brain:
    """mempalace 3.11.0's dispatcher over an in-memory palace, with faults fired on cue."""

    def __init__(self, *, transport: str, plan: FaultPlan, journal: Journal, store: PalaceStore,
                 lease: Lease) -> None:
        self.transport = transport
        self.journal = journal
        self.store = store
        self.lease = lease
        self.catalogue = tool_catalogue()
        self.tools = {t["name"]: t for t in self.catalogue["tools"]}
        policies = self.catalogue["policies"]
        self.lease_taking = frozenset(policies["lease_taking"])
        self.extra_required: dict[str, list[str]] = policies["extra_required"]
        self.aliases: dict[str, dict[str, str]] = policies["argument_aliases"]
        self.dropped = frozenset(policies["silently_dropped_arguments"])
        self.versions: list[str] = self.catalogue["supported_protocol_versions"]
        self.index = OccurrenceIndex(journal)
        self.faults: list[tuple[Fault, int]] = []  # (fault, occurrences already seen when armed)
        for fault in plan.for_transport(transport).faults:
            self.arm(fault, at_zero=True)
        self.server_request_seq = 0

    # -- faults ---------------------------------------------------------------------------

    def arm(self, fault: Fault, at_zero: bool = False) -> None:
        """Add a fault; one armed at runtime counts only messages that arrive after it."""
        self.index.refresh()
        self.faults.append((fault, 0 if at_zero else self.index.count(fault)))

    def clear_faults(self) -> None:
        self.faults.clear()

    def _fire(self, method: str | None, tool: str | None) -> list[Fault]:
        fired = []
        for fault, base in self.faults:
            if fault.on.method == STARTUP or not fault.on.selects(method, tool, self.transport):
                continue
            occurrence = self.index.count(fault) - base
            if fault.fires_at(occurrence):
                fired.append(fault)
                self.journal.record("fault", fault_id=fault.id, action=fault.action,
                                    occurrence=occurrence, method=method, tool=tool)
        return fired

    def start_process(self, argv: list[str]) -> list[Fault]:
        """Journal this process's start and return the ``$startup`` faults it must obey."""
        with self.journal.exclusive():
            self.journal.record("process_start", argv=argv)
            self.index.refresh()
            fired = []
            for fault, base in self.faults:
                if fault.on.method != STARTUP:
                    continue
                occurrence = self.index.count(fault) - base
                if fault.fires_at(occurrence):
                    fired.append(fault)
                    self.journal.record("fault", fault_id=fault.id, action=fault.action,
                                        occurrence=occurrence, method=STARTUP, tool=None)
        return fired

    # -- inbound ----------------------------------------------------------------------------

    def receive(self, raw: bytes | str, meta: dict[str, Any] | None = None) -> Exchange:
        """Parse, journal and classify one inbound message; decide its faults and reply."""
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        extra = dict(meta or {})
        try:
            message = json.loads(text)
        except json.JSONDecodeError:
            self.journal.record("recv", raw=text[:4096], method=None, **extra)
            return Exchange(None, "invalid",
                            compute=lambda: rpc_error(None, -32700, "Parse error"))
        if isinstance(message, list):
            self.journal.record("recv", message=message, method=None, **extra)
            return Exchange(None, "invalid",
                            compute=lambda: rpc_error(None, -32600, "Invalid Request"))
        if not isinstance(message, dict):
            self.journal.record("recv", message=message, method=None, **extra)
            return Exchange(None, "invalid",
                            compute=lambda: rpc_error(None, -32603, "Internal error"))
        method = message.get("method")
        if method is None and ("result" in message or "error" in message):
            self.journal.record("recv", message=message, method=None, response=True, **extra)
            return Exchange(message, "response")
        tool = None
        params = message.get("params")
        if method == "tools/call" and isinstance(params, dict) and isinstance(params.get("name"), str):
            tool = params["name"]
        is_notification = isinstance(method, str) and method.startswith("notifications/")
        with self.journal.exclusive():
            self.journal.record("recv", message=message, method=method, tool=tool,
                                id=message.get("id"), **extra)
            self.index.refresh()
            fired = self._fire(method if isinstance(method, str) else None, tool)
        exchange = Exchange(message, "notification" if is_notification else "request", fired)
        exchange.compute = lambda: self._dispatch(message, exchange)
        if tool == "mempalace_event_wait":
            args = params.get("arguments") or {}
            timeout_ms = args.get("timeout_ms", 60000) if isinstance(args, dict) else 60000
            if isinstance(timeout_ms, int | float):
                exchange.hold_seconds = min(max(float(timeout_ms), 0.0), 300000.0) / 1000.0
        return exchange

    def _dispatch(self, message: dict[str, Any], exchange: Exchange) -> dict[str, Any] | None:
        method = message.get("method")
        has_id = "id" in message
        request_id = message.get("id")
        params = message.get("params")
        if not isinstance(params, dict):
            params = {}
        if not isinstance(method, str):
            return rpc_error(request_id, -32601,
                             f"Unknown method: expected a string, got {type(method).__name__}"
                             if method is not None else
                             "Unknown method: expected a string, got NoneType")
        if method.startswith("notifications/"):
            return None
        if method == "initialize":
            return rpc_result(request_id, self._initialize(params))
        if method == "ping":
            return rpc_result(request_id, {})
        if method == "tools/list":
            return rpc_result(request_id, {"tools": self.catalogue["tools"]})
        if method == "tools/call":
            return self._tools_call(request_id, params, exchange)
        if not has_id:
            return None
        return rpc_error(request_id, -32601, f"Unknown method: {method}")

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        offered = params.get("protocolVersion")
        if offered is None:
            version = self.versions[-1]
        elif offered in self.versions:
            version = offered
        else:
            version = self.versions[0]
        return {"protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "mempalace", "version": VERSION}}

    def _tools_call(self, request_id: Any, params: dict[str, Any],
                    exchange: Exchange) -> dict[str, Any]:
        if "name" not in params:
            return rpc_error(request_id, -32602, "Invalid params: 'name' is required for tools/call")
        name = params["name"]
        arguments = params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            return rpc_error(request_id, -32602,
                             "Invalid params: 'name' must be a string and 'arguments' an object")
        spec = self.tools.get(name)
        if spec is None:
            return rpc_error(request_id, -32601, f"Unknown tool: {name}")
        args = {k: v for k, v in (arguments or {}).items() if k not in self.dropped}
        properties: dict[str, Any] = spec["inputSchema"].get("properties", {})
        unknown = [k for k in args if k not in properties]
        if unknown:
            if len(unknown) == 1:
                text = f"Unknown parameter '{unknown[0]}' for tool {name}"
            else:
                text = "Unknown parameters " + ", ".join(f"'{u}'" for u in unknown) + f" for tool {name}"
            return rpc_error(request_id, -32602, text)
        for key, value in list(args.items()):
            kind = properties[key].get("type")
            if kind in ("integer", "number") and not isinstance(value, bool):
                try:
                    args[key] = int(float(value)) if kind == "integer" else float(value)
                except (TypeError, ValueError):
                    return rpc_error(request_id, -32602, f"Invalid value for parameter '{key}'")
        if name in self.lease_taking:
            contention = self._writer_contention(exchange)
            if contention is not None:
                return rpc_error(request_id, -32001, PEER_WRITER_MESSAGE, {
                    "tool": name, "palace": contention.palace, "reason": contention.reason,
                    "failure_kind": "peer_contention"})
        for alias, target in self.aliases.get(name, {}).items():
            if alias in args:
                value = args.pop(alias)
                args.setdefault(target, value)
        required = list(spec["inputSchema"].get("required", [])) + self.extra_required.get(name, [])
        for key in required:
            if key not in args:
                return rpc_error(request_id, -32602,
                                 f"Missing required parameter '{key}' for tool {name}")
        try:
            payload = run_tool(self.store, name, args, self.lease.palace)
        except (ToolFailure, KeyError, TypeError, ValueError, OSError) as exc:
            return rpc_error(request_id, -32000, "Internal tool error",
                             {"error_class": type(exc).__name__, "message": str(exc)})
        return rpc_result(request_id, tool_result(payload))

    def _writer_contention(self, exchange: Exchange) -> Contention | None:
        simulated = exchange.fault("lock_held")
        if simulated is not None:
            pid = simulated.params.get("pid", 4242)
            argv = simulated.params.get("argv", "mempalace-mcp")
            return Contention(self.lease.palace, f"{pid} ({argv})")
        was_held = self.lease.held
        contention = self.lease.acquire()
        if contention is None and not was_held:
            self.journal.record("lease", event="acquired", palace=self.lease.palace)
        elif contention is not None:
            self.journal.record("lease", event="contended", palace=self.lease.palace,
                                holder=contention.holder)
        return contention

    def next_server_request_id(self) -> str:
        self.server_request_seq += 1
        return f"fake-srv-{self.server_request_seq}"
