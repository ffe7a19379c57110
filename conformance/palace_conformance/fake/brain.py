"""The one brain of the fake: JSON-RPC dispatch as mempalace 3.11.0 does it, plus fault matching.

Both transports hand every inbound message to :meth:`Brain.receive` and play the returned
:class:`Exchange` (see ``playback``). The brain never sleeps or writes bytes itself; it decides.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from palace_conformance.fake.faults import STARTUP, Fault, FaultPlan, Match
from palace_conformance.fake.journal import Journal, JournalTail, start_fields
from palace_conformance.fake.lease import Contention, Lease
from palace_conformance.fake.palace import BACKEND_OPEN_FAILED, PalaceStore, run_tool
from palace_conformance.resources import tool_catalogue

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any

PEER_WRITER_MESSAGE = "Peer MCP writer active; this server is read-only for mutating tools"
INIT_FAILED_MESSAGE = ("MCP writer initialization failed; this server is read-only for "
                       "mutating tools")


def rpc_error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def rpc_result(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def tool_result(payload: Any) -> dict[str, Any]:
    """The tools/call result 3.11 wraps a tool's answer in: one pretty-printed JSON text block,
    flagged ``isError`` only for a backend that failed to open (a fresh palace's list_drawers)."""
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if isinstance(payload, dict) and payload.get("error") == BACKEND_OPEN_FAILED:
        result["isError"] = True
    return result


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def _typed(value: Any) -> tuple[str, Any]:
    """An id as a set member that tells ``1`` from ``"1"`` and from ``true``."""
    return (type(value).__name__, value)


def _event_wait_seconds(arguments: Any) -> float:
    """How long ``event_wait`` blocks before its empty answer: ``timeout_ms`` capped at 300 s."""
    timeout_ms: Any = arguments.get("timeout_ms", 60000) if isinstance(arguments, dict) else 60000
    try:
        value = float(int(timeout_ms)) if not isinstance(timeout_ms, int | float) else timeout_ms
    except (TypeError, ValueError):
        return 0.0
    if value != value:  # NaN
        return 0.0
    return min(max(float(value), 0.0), 300000.0) / 1000.0


def _no_reply() -> dict[str, Any] | None:
    return None


class Exchange:
    """One inbound message, the faults it fired, and (lazily) the reply the palace gives.

    A plain class, not a dataclass: importing ``dataclasses`` costs the stdio fake a fifth of its
    cold start, and a bridge under test respawns it often."""

    def __init__(self, message: dict[str, Any] | None, kind: str,
                 faults: list[Fault] | None = None,
                 compute: Callable[[], dict[str, Any] | None] = _no_reply,
                 hold_seconds: float = 0.0, log: str | None = None) -> None:
        self.message = message
        self.kind = kind  # request | notification | response | invalid
        self.faults: list[Fault] = faults if faults is not None else []
        self.compute = compute
        self.hold_seconds = hold_seconds
        self.log = log  # the stderr line mempalace prints for this message, if any
        self._reply: dict[str, Any] | None = None
        self._computed = False

    def __repr__(self) -> str:
        return f"Exchange(kind={self.kind!r}, method={self.method!r}, id={self.request_id!r})"

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

    def __init__(self, journal: Journal, faults_for: str | None = None) -> None:
        self.tail = JournalTail(journal)
        self.seen: list[tuple[str | None, str | None, str]] = []
        self.starts: list[str] = []  # transport of every process start, in order
        #: ``PALACE_FAKE_FAULTS_FOR``: only that catalogue's processes count (their starts say it)
        self.faults_for = faults_for
        self.other: set[Any] = set()  # pids serving another catalogue

    def refresh(self) -> None:
        for record in self.tail.new_records():
            if self.faults_for is not None and record.get("kind") == "process_start" and \
                    record.get("catalogue", self.faults_for) != self.faults_for:
                self.other.add(record.get("pid"))
            if record.get("pid") in self.other:
                continue
            if record.get("kind") == "process_start":
                self.starts.append(record.get("transport", ""))
            elif record.get("kind") == "recv" and isinstance(record.get("method"), str):
                self.seen.append((record.get("method"), record.get("tool"), record["transport"]))

    def count(self, fault: Fault) -> int:
        if fault.on.method == STARTUP:
            return sum(1 for tr in self.starts if fault.on.transport in (None, tr))
        return sum(1 for m, t, tr in self.seen if fault.on.selects(m, t, tr))


class Brain:
    """mempalace 3.11.0's dispatcher over an in-memory palace, with faults fired on cue."""

    def __init__(self, *, transport: str, plan: FaultPlan, journal: Journal, store: PalaceStore,
                 lease: Lease, catalogue: str = "full", faults_for: str | None = None) -> None:
        self.transport = transport
        self.journal = journal
        self.store = store
        self.lease = lease
        # the full server's 47 tools, or the light server's 3 (same dispatch, own serverInfo)
        self.catalogue = tool_catalogue(catalogue)
        self.server_info: dict[str, str] = dict(self.catalogue["server"])
        self.tools = {t["name"]: t for t in self.catalogue["tools"]}
        policies = self.catalogue["policies"]
        self.lease_taking = frozenset(policies["lease_taking"])
        self.extra_required: dict[str, list[str]] = policies["extra_required"]
        self.aliases: dict[str, dict[str, str]] = policies["argument_aliases"]
        self.dropped = frozenset(policies["silently_dropped_arguments"])
        self.versions: list[str] = self.catalogue["supported_protocol_versions"]
        self.faults_for = faults_for
        self.catalogue_name = catalogue
        self.index = OccurrenceIndex(journal, faults_for)
        self.faults: list[tuple[Fault, int]] = []  # (fault, occurrences already seen when armed)
        for fault in plan.for_transport(transport).faults:
            self.arm(fault, at_zero=True)
        self.server_request_seq = 0
        self.issued_requests: set[str] = set()  # ids of server->client requests awaiting replies
        self.request_ids: set[tuple[str, Any]] = set()  # ids of requests received, typed

    # -- faults ---------------------------------------------------------------------------

    def arm(self, fault: Fault, at_zero: bool = False) -> None:
        """Add a fault; one armed at runtime counts only messages that arrive after it."""
        self.index.refresh()
        self.faults.append((fault, 0 if at_zero else self.index.count(fault)))

    def clear_faults(self) -> None:
        self.faults.clear()

    def _fire(self, method: str | None, tool: str | None) -> list[Fault]:
        fired: list[Fault] = []
        if method is None:  # only messages with a method string count as occurrences
            return fired
        return self._fired(lambda on: on.method != STARTUP
                           and on.selects(method, tool, self.transport), method, tool)

    def _fired(self, aimed: Callable[[Match], bool], method: str,
               tool: str | None) -> list[Fault]:
        """Of the faults ``aimed`` at this message, those whose occurrence it is, journaled."""
        fired: list[Fault] = []
        for fault, base in self.faults:
            if not aimed(fault.on):
                continue
            occurrence = self.index.count(fault) - base
            if fault.fires_at(occurrence):
                fired.append(fault)
                self.journal.record("fault", fault_id=fault.id, action=fault.action,
                                    occurrence=occurrence, method=method, tool=tool)
        return fired

    def start_process(self, argv: list[str],
                      env: dict[str, str] | None = None) -> list[Fault]:
        """Journal this process's start and return the ``$startup`` faults it must obey.

        ``created_t`` (when known) is when the process was created: a gap to this record is
        the bridge's spawn, not this interpreter's start (``journal.process_created``)."""
        created = start_fields()  # outside the lock: a contender must not wait for /proc
        with self.journal.exclusive():
            served = {"catalogue": self.catalogue_name} if self.faults_for is not None else {}
            given = {} if env is None else {"env": env}
            self.journal.record("process_start", argv=argv, **given, **created, **served)
            self.index.refresh()
            return self._fired(lambda on: on.method == STARTUP, STARTUP, None)

    # -- inbound ----------------------------------------------------------------------------

    def receive(self, raw: bytes | str, meta: dict[str, Any] | None = None) -> Exchange:
        """Parse, journal and classify one inbound message; decide its faults and reply."""
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        extra = dict(meta or {})
        try:
            message = json.loads(text)
        except (ValueError, RecursionError) as exc:  # ValueError: e.g. a 5000-digit integer
            # mempalace logs the decoder's complaint and answers -32700 with a null id.
            self.journal.record("recv", raw=text[:4096], method=None, **extra)
            return Exchange(None, "invalid", log=f"Server error: {type(exc).__name__}: {exc}",
                            compute=lambda: rpc_error(None, -32700, "Parse error"))
        if not isinstance(message, dict):
            # a batch array, or any other JSON value: handle_request refuses it without a log line
            self.journal.record("recv", message=message, method=None, **extra)
            return Exchange(None, "invalid",
                            compute=lambda: rpc_error(None, -32600, "Invalid Request"))
        raw_method = message.get("method")
        method = raw_method if isinstance(raw_method, str) else None
        if (method is None and ("result" in message or "error" in message)
                and _hashable(message.get("id")) and message.get("id") in self.issued_requests):
            # the bridge answering a request this fake sent (fault server_request)
            self.issued_requests.discard(message["id"])
            self.journal.record("recv", message=message, method=None, response=True, **extra)
            return Exchange(message, "response")
        tool = None
        params = message.get("params")
        if (method == "tools/call" and isinstance(params, dict)
                and isinstance(params.get("name"), str)):
            tool = params["name"]
        is_notification = method is not None and method.startswith("notifications/")
        if (not is_notification and message.get("id") is not None
                and _hashable(message.get("id"))):
            self.request_ids.add(_typed(message.get("id")))
        elif method == "notifications/cancelled" and isinstance(params, dict):
            # whether requestId names a request this process got, JSON type included ("1" != 1)
            target = params.get("requestId")
            extra["request_known"] = (target is not None and _hashable(target)
                                      and _typed(target) in self.request_ids)
        with self.journal.exclusive():
            self.journal.record("recv", message=message, method=method, tool=tool,
                                id=message.get("id"), **extra)
            if self.faults:
                self.index.refresh()
            fired = self._fire(method, tool)
        exchange = Exchange(message, "notification" if is_notification else "request", fired)
        exchange.compute = lambda: self._dispatch_safely(message, exchange)
        if tool == "mempalace_event_wait":
            arguments = params.get("arguments") if isinstance(params, dict) else None
            exchange.hold_seconds = _event_wait_seconds(arguments)
        return exchange

    def _dispatch_safely(self, message: dict[str, Any],
                         exchange: Exchange) -> dict[str, Any] | None:
        """Like mempalace's loop: a dispatch crash is -32603, or silence for an id-less message."""
        try:
            return self._dispatch(message, exchange)
        except Exception as exc:
            self.journal.record("dispatch_error", error_class=type(exc).__name__, message=str(exc))
            request_id = message.get("id")
            return None if request_id is None else rpc_error(request_id, -32603, "Internal error")

    def _dispatch(self, message: dict[str, Any], exchange: Exchange) -> dict[str, Any] | None:
        raw_method = message.get("method")
        method = raw_method if isinstance(raw_method, str) else ""
        request_id = message.get("id")
        params = message.get("params")
        if not isinstance(params, dict):
            params = {}  # mempalace treats by-position (array) params as empty
        if method.startswith("notifications/"):
            return None
        if method == "initialize":
            return rpc_result(request_id, self._initialize(params, exchange))
        if method == "ping":
            return rpc_result(request_id, {})
        if method == "tools/list":
            return rpc_result(request_id, {"tools": self.catalogue["tools"]})
        if method == "tools/call":
            return self._tools_call(request_id, params, exchange)
        if request_id is None:  # an explicit null id is as silent as a missing one
            return None
        if not isinstance(raw_method, str):
            return rpc_error(request_id, -32601, "Unknown method: expected a string, got "
                             f"{type(raw_method).__name__}")
        return rpc_error(request_id, -32601, f"Unknown method: {method}")

    def _initialize(self, params: dict[str, Any], exchange: Exchange) -> dict[str, Any]:
        # absent -> the oldest version (a 3.11 quirk); present but unknown (even null) -> the newest
        offered = params.get("protocolVersion", self.versions[-1])
        version = offered if offered in self.versions else self.versions[0]
        if (settle := exchange.fault("negotiate_version")) is not None:
            version = str(settle.params["version"])  # an older version the server prefers
        return {"protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": dict(self.server_info)}

    def _tools_call(self, request_id: Any, params: dict[str, Any],
                    exchange: Exchange) -> dict[str, Any]:
        if "name" not in params:
            return rpc_error(request_id, -32602,
                             "Invalid params: 'name' is required for tools/call")
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
                quoted = ", ".join(f"'{u}'" for u in unknown)
                text = f"Unknown parameters {quoted} for tool {name}"
            return rpc_error(request_id, -32602, text)
        for key, value in list(args.items()):
            kind = properties[key].get("type") if isinstance(properties[key], dict) else None
            try:  # exactly mempalace's coercion: int("3.5") fails, int(3.5) is 3, bools pass
                if kind == "integer" and not isinstance(value, int):
                    args[key] = int(value)
                elif kind == "number" and not isinstance(value, int | float):
                    args[key] = float(value)
            except (TypeError, ValueError):
                return rpc_error(request_id, -32602, f"Invalid value for parameter '{key}'")
        if name in self.lease_taking:
            contention = self._writer_contention(exchange)
            if contention is not None:
                message = (PEER_WRITER_MESSAGE if contention.kind == "peer_contention"
                           else INIT_FAILED_MESSAGE)
                return rpc_error(request_id, -32001, message, {
                    "tool": name, "palace": contention.palace, "reason": contention.reason,
                    "failure_kind": contention.kind})
        for alias, target in self.aliases.get(name, {}).items():
            if alias in args:
                value = args.pop(alias)
                if args.get(target) is None:  # an explicit target wins, unless it is null
                    args[target] = value
        required = list(spec["inputSchema"].get("required", [])) + self.extra_required.get(name, [])
        missing = [key for key in dict.fromkeys(required) if key not in args]
        if missing:
            word = "parameter" if len(missing) == 1 else "parameters"
            quoted = ", ".join(f"'{key}'" for key in missing)
            return rpc_error(request_id, -32602,
                             f"Missing required {word} {quoted} for tool {name}")
        try:
            payload = run_tool(self.store, name, args, self.lease.palace)
        except Exception as exc:  # mempalace turns any handler exception into -32000
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
        request_id = f"fake-srv-{os.getpid()}-{self.server_request_seq}"
        self.issued_requests.add(request_id)
        return request_id
