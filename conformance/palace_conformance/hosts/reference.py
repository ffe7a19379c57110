"""The driver host for the reference bridge: ``python -m palace_conformance.hosts.reference``.

It plays pi's part around ``palace_bridge.extension.activate`` and speaks DRIVER.md on stdin and
stdout. stdout is reserved for protocol: at start-up fd 1 is moved aside and pointed at stderr, so
a stray ``print`` anywhere in the process cannot corrupt a reply. Every op races its deadline
(``timeout_ms``, default 30 s) and answers ``host_timeout`` instead of hanging.

Error kinds (the mapping DRIVER.md leaves to each host): ``PalaceTimeout`` -> ``timeout``,
``PalaceUnavailable`` -> ``unavailable``, ``PalaceConnectionClosed`` -> ``connection_closed``,
``PalaceToolError`` -> ``tool_error`` (code, message, data kept), ``PalaceAuthError`` -> ``auth``
(``data.status``), ``PalaceSessionLost`` -> ``session_lost``, ``PalaceHTTPError`` ->
``http_error`` (``data.status``; ``code`` when the body held a JSON-RPC error),
``PalaceProtocolError`` -> ``protocol``, a built-in ``TimeoutError`` -> ``timeout``, anything
else -> ``exception``.

``introspect.observed`` (what ``profile init`` drafts a profile from): ``env_reads`` are the names
the bridge looked up in the environment it was loaded with. Every knob of the reference bridge is
read in one place, ``BridgeConfig.from_env``, so while ``load`` runs that method is given a
mapping that notes the names looked up (never the values); reads of ``os.environ`` elsewhere are
not recorded (the bridge makes none for its configuration). ``spawned`` lists the argv of the
children it started; failed starts are not seen (the bridge looks its program up on PATH first
and reports a missing one without trying). ``files`` is always empty: the reference bridge reads
no settings file, and recording Python's file opens would need a process-wide audit hook.

``reload`` plays pi's ``/reload``: ``session_shutdown`` (reason ``reload``) goes to the loaded
bridge's handlers, then the bridge is dropped as pi drops an extension instance (nothing else
stops it: the host does not stop its client, so a bridge that ignores the event keeps its child),
and ``activate`` runs again into an empty registry (tools, commands, handlers) with the current
``os.environ``. The module is not imported again: a selftest mutant patches it in this process.
The children of every instance stay in ``introspect.children`` and ``shutdown``'s count.

``call_tool`` validates the arguments against the registered schema first (``validate``, default
true), as pi does; a mismatch is a tool result with ``is_error: true`` and the bridge is not called
(pi's type coercion of ``"7"`` to ``7`` is not modelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import palace_bridge
from palace_bridge import errors
from palace_bridge.config import BridgeConfig
from palace_bridge.extension import Bridge, activate
from palace_bridge.host import (
    SESSION_SHUTDOWN,
    CommandDefinition,
    InjectedMessage,
    RecordingHost,
    ToolDefinition,
)
from palace_conformance.contract import (
    CALL_TOOLS_MAX,
    CALL_TOOLS_MIN,
    CAPABILITIES,
    DRIVER_PROTOCOL,
)
from palace_conformance.errors import HostError
from palace_conformance.hosts.bridge_cli import CliRequestError, run_bridge_cli
from palace_conformance.processes import alive, argv_of

IMPL = "palace-conformance-python-host"
DEFAULT_TIMEOUT_MS = 30000
DEFAULT_GRACE_MS = 5000
#: a note ``hello`` adds to the bridge's name, e.g. ``mutant NAME`` from the selftest's host
#: (:mod:`palace_conformance.selftest.host`), which patches the bridge before it calls :func:`main`
VARIANT: str | None = None

_KINDS: tuple[tuple[type[BaseException], str], ...] = (
    (errors.PalaceTimeout, "timeout"),
    (errors.PalaceUnavailable, "unavailable"),
    (errors.PalaceConnectionClosed, "connection_closed"),
    (errors.PalaceToolError, "tool_error"),
    (errors.PalaceAuthError, "auth"),
    (errors.PalaceSessionLost, "session_lost"),
    (errors.PalaceHTTPError, "http_error"),
    (errors.PalaceProtocolError, "protocol"),
    (TimeoutError, "timeout"),
)


class OpError(HostError):
    """An op that failed; ``payload`` is the DRIVER.md error object."""

    def __init__(self, kind: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.payload = {"kind": kind, "message": message, **extra}


def error_payload(exc: BaseException) -> dict[str, Any]:
    """The DRIVER.md error object for anything the bridge raised."""
    if isinstance(exc, OpError):
        return exc.payload
    kind = next((k for cls, k in _KINDS if isinstance(exc, cls)), "exception")
    if isinstance(exc, errors.PalaceToolError):
        payload: dict[str, Any] = {"kind": kind, "message": exc.message, "code": exc.code}
        if exc.data is not None:
            payload["data"] = exc.data
        return payload
    payload = {"kind": kind, "message": errors.describe(exc)}
    if kind == "exception":
        payload["message"] = f"{type(exc).__name__}: {errors.describe(exc)}"
    if isinstance(exc, errors.PalaceHTTPError):
        payload["data"] = {"status": exc.status}
        if exc.code is not None:
            payload["code"] = exc.code
    elif isinstance(exc, errors.PalaceAuthError):
        payload["data"] = {"status": exc.status}
    return payload


@dataclass
class DriverHost(RecordingHost):
    """The recording host, plus which API the bridge touched and a cursor over reported effects."""

    api_touched: set[str] = field(default_factory=set)
    reported: int = 0

    def take_effects(self) -> list[dict[str, Any]]:
        """Effects not yet reported (including ones produced between ops), in order."""
        fresh = self.effects[self.reported:]
        self.reported = len(self.effects)
        return fresh

    def register_tool(self, tool: ToolDefinition) -> None:
        self.api_touched.add("registerTool")
        super().register_tool(tool)

    def register_command(self, command: CommandDefinition) -> None:
        self.api_touched.add("registerCommand")
        super().register_command(command)

    def on(self, event: str, handler: Callable[[dict[str, Any]], Awaitable[Any]]) -> Any:
        self.api_touched.add("on")
        return super().on(event, handler)

    def send_message(self, custom_type: str, content: str, **options: Any) -> None:
        self.api_touched.add("sendMessage")
        super().send_message(custom_type, content, **options)

    def send_user_message(self, content: str, **options: Any) -> None:
        self.api_touched.add("sendUserMessage")
        super().send_user_message(content, **options)

    async def exec(self, argv: Any, **options: Any) -> Any:
        self.api_touched.add("exec")
        return await super().exec(argv, **options)

    def stderr(self, line: str) -> None:
        for part in str(line).splitlines() or [""]:
            super().stderr(part)


class _NotedEnv(Mapping[str, str]):
    """The bridge's environment, noting which names are looked up (enumerating is no look-up)."""

    def __init__(self, env: Mapping[str, str], names: set[str]) -> None:
        self._env = env
        self._names = names

    def __getitem__(self, key: str) -> str:
        self._names.add(key)
        return self._env[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self._names.add(key)
        return key in self._env

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


@contextlib.contextmanager
def _noting_env_reads(names: set[str]) -> Iterator[None]:
    """While active, ``BridgeConfig.from_env`` (whatever it is now: a mutant may have replaced
    it) reads its mapping through :class:`_NotedEnv`; restored afterwards."""
    current = BridgeConfig.__dict__["from_env"]

    def from_env(cls: type[BridgeConfig], env: Mapping[str, str]) -> BridgeConfig:
        config: BridgeConfig = current.__func__(cls, _NotedEnv(env, names))
        return config

    BridgeConfig.from_env = classmethod(from_env)  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        BridgeConfig.from_env = current  # type: ignore[method-assign]


#: the schemas (their canonical JSON) that passed their metaschema in this process. The warm
#: server fills it with the fake's catalogues before it forks (:func:`warm_up`), so a forked host
#: does not walk the metaschema again for each call it validates: that walk was about a fifth of
#: a host's CPU (docs/runner.md, "Where a run's CPU goes")
_SOUND_SCHEMAS: set[str] = set()


def _validation_problems(schema: Any, args: Any) -> list[str]:
    """pi validates tool arguments against the registered schema before ``execute``."""
    validator = _validator_for(schema)
    if validator is None:
        return []  # an unusable schema is the bridge's problem; the call goes through
    problems = []
    for error in sorted(validator.iter_errors(args), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in error.path) or "root"
        problems.append(f"{where}: {error.message}")
    return problems


def _validator_for(schema: Any) -> Any:
    """A validator of ``schema``'s draft (2020-12 when it names none), or None when ``schema``
    fails its metaschema."""
    import jsonschema

    key = _schema_key(schema)
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        if key is None or key not in _SOUND_SCHEMAS:
            cls.check_schema(schema)
            if key is not None:
                _SOUND_SCHEMAS.add(key)
        return cls(schema)
    except jsonschema.SchemaError:
        return None


def _schema_key(schema: Any) -> str | None:
    """``schema`` as canonical JSON, or None when it is not JSON (then it is checked each time)."""
    try:
        return json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None


def warm_up() -> None:
    """Check the input schemas of the fake's tool catalogues, once: the warm server calls this
    before it forks hosts, whose bridges register those schemas as they receive them."""
    from palace_conformance.resources import CATALOGUES, tool_catalogue

    for name in CATALOGUES:
        for tool in tool_catalogue(name)["tools"]:
            _validator_for(tool.get("inputSchema"))


class ReferenceHost:
    """Implements every DRIVER.md op for the reference bridge."""

    def __init__(self) -> None:
        self.host = DriverHost(echo_stderr=True)
        self.bridge: Bridge | None = None
        self.retired: list[Bridge] = []  # instances a reload replaced; their children still count
        self.session: list[Any] = []
        self.known_pids: list[int] = []
        self.known_argv: dict[int, list[str]] = {}
        self.env_reads: set[str] = set()
        self.ops: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "hello": self.hello, "load": self.load, "set_session": self.set_session,
            "set_env": self.set_env, "event": self.event, "list_tools": self.list_tools,
            "call_tool": self.call_tool, "call_tools": self.call_tools, "command": self.command,
            "settle": self.settle,
            "introspect": self.introspect, "shutdown": self.shutdown, "reload": self.reload,
            "exit": self.exit, "abandon": self.exit, "cli": self.cli,
        }

    # -- ops ----------------------------------------------------------------------------------

    async def hello(self, request: dict[str, Any]) -> Any:
        return {"protocol": DRIVER_PROTOCOL, "impl": IMPL,
                "bridge": f"palace_bridge {palace_bridge.__version__}"
                + (f" [{VARIANT}]" if VARIANT else ""),
                "runtime": f"{platform.python_implementation()} {platform.python_version()}",
                "capabilities": list(CAPABILITIES)}

    async def load(self, request: dict[str, Any]) -> Any:
        if self.bridge is not None:
            raise OpError("bad_request", "the bridge is already loaded")
        env = request.get("env")
        if not isinstance(env, dict):
            raise OpError("bad_request", "load needs 'env': an object of strings")
        env = {str(k): str(v) for k, v in env.items() if v is not None}
        os.environ.clear()
        os.environ.update(env)
        if request.get("cwd"):
            os.chdir(str(request["cwd"]))
        await self._activate(env)
        return self._registered()

    async def reload(self, request: dict[str, Any]) -> Any:
        if self.bridge is None:
            raise OpError("bad_request", "reload needs a loaded bridge: send load first")
        self._children()  # the old instance's children, before it is dropped
        await self.host.emit(SESSION_SHUTDOWN, {"reason": "reload"})
        self.retired.append(self.bridge)
        self.bridge = None
        self.host.tools.clear()
        self.host.commands.clear()
        self.host.handlers.clear()
        await self._activate(dict(os.environ))
        return self._registered()

    async def _activate(self, env: dict[str, str]) -> None:
        with _noting_env_reads(self.env_reads):
            self.bridge = await activate(self.host, env)

    def _registered(self) -> dict[str, Any]:
        """``load``'s result: what the bridge registered."""
        return {"tools": list(self.host.tools), "commands": list(self.host.commands),
                "events": list(self.host.handlers)}

    async def set_session(self, request: dict[str, Any]) -> Any:
        messages = request.get("messages") or []
        self.session = list(messages) if isinstance(messages, list) else []
        return {"entries": len(self.session)}

    async def set_env(self, request: dict[str, Any]) -> Any:
        changes = request.get("env")
        if not isinstance(changes, dict):
            raise OpError("bad_request", "set_env needs 'env': an object")
        for key, value in changes.items():
            if value is None:
                os.environ.pop(str(key), None)
            else:
                os.environ[str(key)] = str(value)
        return None

    async def event(self, request: dict[str, Any]) -> Any:
        name = request.get("name")
        if not isinstance(name, str):
            raise OpError("bad_request", "event needs 'name'")
        payload = request.get("payload") or {}
        results = await self.host.emit(name, payload if isinstance(payload, dict) else {})
        if name == "before_agent_start":
            return {"messages": [{"custom_type": r.custom_type, "content": r.content}
                                 for r in results if isinstance(r, InjectedMessage)]}
        return None

    async def list_tools(self, request: dict[str, Any]) -> Any:
        return [{"name": t.name, "description": t.description, "parameters": t.parameters}
                for t in self.host.tools.values()]

    async def call_tool(self, request: dict[str, Any]) -> Any:
        name = request.get("name")
        tool = self.host.tools.get(str(name))
        if tool is None:
            raise OpError("no_such_tool", f"no tool registered as {name!r}")
        args = request.get("args")
        args = {} if args is None else args
        if request.get("validate", True):
            problems = _validation_problems(tool.parameters, args)
            if problems:
                text = f'Validation failed for tool "{name}":\n' + "\n".join(
                    f"  - {p}" for p in problems)
                return {"content": [{"type": "text", "text": text}], "is_error": True,
                        "validation": problems}
        if not isinstance(args, dict):
            raise OpError("bad_request", "call_tool 'args' must be an object")
        outcome = await tool.execute(f"call-{request.get('id')}", dict(args))
        result: dict[str, Any] = {"content": list(outcome.content), "is_error": outcome.is_error}
        if outcome.details is not None:
            result["details"] = outcome.details
        return result

    async def call_tools(self, request: dict[str, Any]) -> Any:
        """Start every call at once (a harness running a message's tool calls in parallel) and
        answer when all have ended, in request order; one call's failure is that call's."""
        calls = request.get("calls")
        if (not isinstance(calls, list) or not CALL_TOOLS_MIN <= len(calls) <= CALL_TOOLS_MAX
                or not all(isinstance(call, dict) for call in calls)):
            raise OpError("bad_request", f"call_tools needs 'calls': {CALL_TOOLS_MIN} to "
                          f"{CALL_TOOLS_MAX} objects {{name, args, timeout_ms?}}")
        outcomes = await asyncio.gather(*(
            self._one_call(call, f"{request.get('id')}-{index}")
            for index, call in enumerate(calls)))
        return {"calls": list(outcomes)}

    async def _one_call(self, call: dict[str, Any], call_id: str) -> dict[str, Any]:
        """One call of ``call_tools``, through ``call_tool``: ``{ok, result | error, ms}``."""
        started = time.monotonic()
        given = call.get("timeout_ms")
        bounded = isinstance(given, int | float) and not isinstance(given, bool)
        timeout_ms = given if bounded else None
        outcome: dict[str, Any]
        try:
            work = self.call_tool({**call, "id": call_id})
            result = await (asyncio.wait_for(work, timeout_ms / 1000) if timeout_ms is not None
                            else work)
            outcome = {"ok": True, "result": result}
        except TimeoutError:
            outcome = {"ok": False, "error": {
                "kind": "host_timeout", "message": f"call did not finish within {timeout_ms} ms"}}
        except Exception as exc:
            outcome = {"ok": False, "error": error_payload(exc)}
        outcome["ms"] = round((time.monotonic() - started) * 1000, 3)
        return outcome

    async def command(self, request: dict[str, Any]) -> Any:
        name = request.get("name")
        command = self.host.commands.get(str(name))
        if command is None:
            raise OpError("no_such_command", f"no command registered as {name!r}")
        await command.handler(str(request.get("args") or ""))
        return None

    async def settle(self, request: dict[str, Any]) -> Any:
        quiet_ms = float(request.get("quiet_ms", 200))
        max_ms = float(request.get("max_ms", 5000))
        deadline = time.monotonic() + max_ms / 1000
        if self.bridge is not None:
            # never cancel the drain: that would cancel the bridge's own background work
            drain = asyncio.ensure_future(self.bridge.drain())
            await asyncio.wait({drain}, timeout=max(deadline - time.monotonic(), 0))
        remaining_ms = max((deadline - time.monotonic()) * 1000, 0)
        await self.host.settle(quiet_ms, remaining_ms)
        return None

    def _children(self) -> list[int]:
        """Every child any instance started (a retired one may still respawn), in order."""
        for bridge in [*self.retired, *([self.bridge] if self.bridge is not None else [])]:
            client = bridge.client
            engine = getattr(client, "engine", None)
            for pid in [*getattr(engine, "spawned_pids", []), *getattr(client, "child_pids", [])]:
                if pid not in self.known_pids:
                    self.known_pids.append(pid)
                    self.known_argv[pid] = argv_of(pid)  # kept for observed.spawned
        return list(self.known_pids)

    async def introspect(self, request: dict[str, Any]) -> Any:
        pids = self._children()
        spawned = [{"argv": self.known_argv[pid]} for pid in pids if self.known_argv.get(pid)]
        return {"children": [{"pid": pid, "argv": argv_of(pid), "alive": alive(pid)}
                             for pid in pids],
                "api_touched": sorted(self.host.api_touched),
                "observed": {"env_reads": sorted(self.env_reads), "files": [],
                             "spawned": spawned}}

    async def shutdown(self, request: dict[str, Any]) -> Any:
        grace_ms = float(request.get("grace_ms", DEFAULT_GRACE_MS))
        pids = self._children()
        await self.host.emit(SESSION_SHUTDOWN, {"reason": request.get("reason", "quit")})
        if self.bridge is not None:
            await self.bridge.client.stop()
        pids = self._children() or pids
        deadline = time.monotonic() + grace_ms / 1000
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return {"children_alive": sum(1 for p in pids if alive(p))}

    async def exit(self, request: dict[str, Any]) -> Any:
        return None

    async def cli(self, request: dict[str, Any]) -> Any:
        """Run ``palace-bridge ARGS`` (:mod:`palace_bridge.cli`) as a user would: a process of
        its own, with the environment and directory given, ``stdin`` written then closed."""
        try:
            return await run_bridge_cli(
                request, str(Path(palace_bridge.__file__).resolve().parent.parent))
        except CliRequestError as exc:
            raise OpError("bad_request", str(exc)) from None

    # -- dispatch -----------------------------------------------------------------------------

    async def handle(self, request: Any) -> dict[str, Any]:
        started = time.monotonic()
        if not isinstance(request, dict):
            return self._reply(None, started, error={"kind": "bad_request",
                                                     "message": "a request is a JSON object"})
        request_id = request.get("id")
        op = request.get("op")
        handler = self.ops.get(op) if isinstance(op, str) else None
        if handler is None:
            return self._reply(request_id, started, error={
                "kind": "bad_request", "message": f"unknown op {op!r}"})
        timeout_ms = request.get("timeout_ms", DEFAULT_TIMEOUT_MS)
        if not isinstance(timeout_ms, int | float) or isinstance(timeout_ms, bool):
            timeout_ms = DEFAULT_TIMEOUT_MS
        task = asyncio.ensure_future(handler(request))
        done, _ = await asyncio.wait({task}, timeout=timeout_ms / 1000)
        if not done:
            task.cancel()  # the reply does not wait for the cancellation to finish
            return self._reply(request_id, started, error={
                "kind": "host_timeout", "message": f"{op} did not finish within {timeout_ms} ms"})
        try:
            result = task.result()
        except Exception as exc:
            return self._reply(request_id, started, error=error_payload(exc))
        return self._reply(request_id, started, result=result)

    def _reply(self, request_id: Any, started: float, *, result: Any = None,
               error: Mapping[str, Any] | None = None) -> dict[str, Any]:
        reply: dict[str, Any] = {"id": request_id, "ok": error is None}
        if error is None:
            reply["result"] = result
        else:
            reply["error"] = dict(error)
        reply["effects"] = self.host.take_effects()
        reply["ms"] = round((time.monotonic() - started) * 1000, 3)
        return reply

    async def close(self) -> None:
        """Stop every instance's client, a reload's leftovers included: the host leaves no
        child behind when it exits (the runner took its process facts before)."""
        for bridge in [*self.retired, *([self.bridge] if self.bridge is not None else [])]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(bridge.client.stop(), 5)


async def serve(protocol_fd: int) -> int:
    out = os.fdopen(protocol_fd, "wb", buffering=0)
    host = ReferenceHost()
    abandoned = False
    try:
        while True:
            # a thread, not connect_read_pipe: stdin may be a file or /dev/null, which epoll
            # refuses; requests are sequential, so no read is ever pending when the host exits
            line = await asyncio.to_thread(sys.stdin.buffer.readline)
            if not line:
                return 0
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except json.JSONDecodeError as exc:
                out.write(_encode({"id": None, "ok": False, "effects": [], "error": {
                    "kind": "bad_request", "message": f"request is not JSON: {exc.msg}"}}))
                continue
            reply = await host.handle(request)
            out.write(_encode(reply))
            if isinstance(request, dict) and request.get("op") in ("exit", "abandon"):
                abandoned = request.get("op") == "abandon"
                return 0
    finally:
        if not abandoned:  # abandon: no stop; what ends the children is the bridge's atexit
            await host.close()


def _encode(reply: dict[str, Any]) -> bytes:
    return (json.dumps(reply, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def _warm_up() -> None:
    """Import the argument validator while the runner sets up: a run pays no import on a call."""
    with contextlib.suppress(Exception):
        import jsonschema  # noqa: F401


def main() -> None:
    threading.Thread(target=_warm_up, daemon=True).start()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # from here on, anything printed to "stdout" lands on stderr
    try:
        code = asyncio.run(serve(protocol_fd))
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
