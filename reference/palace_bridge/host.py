"""The host interface the bridge plugs into, shaped like pi's extension API so a driver maps it 1:1.

pi gives an extension ``registerTool``, ``registerCommand``, ``on(event)``, ``sendMessage``,
``sendUserMessage`` and ``exec``; :class:`Host` is the same surface in Python (snake_case, a JSON
Schema passed through as is). :class:`RecordingHost` is an in-memory host for tests and for the
driver: it runs a real subprocess for ``exec`` (or a scripted one) and records every host-visible
effect in order, in the shapes ``DRIVER.md`` names, so assertions read one list.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# pi's event names (0.73.1 and 1.6.0); the bridge subscribes to these four.
SESSION_START = "session_start"
BEFORE_AGENT_START = "before_agent_start"
AGENT_SETTLED = "agent_settled"
SESSION_SHUTDOWN = "session_shutdown"
EVENTS = (SESSION_START, BEFORE_AGENT_START, AGENT_SETTLED, SESSION_SHUTDOWN)

DeliverAs = Literal["steer", "followUp", "nextTurn"]


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool's execute returns: pi's ``{content, details, isError}``."""

    content: list[dict[str, Any]]
    details: Any = None
    is_error: bool = False

    @property
    def text(self) -> str:
        return "\n".join(str(c.get("text", "")) for c in self.content if c.get("type") == "text")


ToolExecute = Callable[[str, dict[str, Any]], Awaitable[ToolOutcome]]
CommandHandler = Callable[[str], Awaitable[None]]
EventHandler = Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class ToolDefinition:
    """pi's ``registerTool`` argument; ``parameters`` is the JSON Schema exactly as received."""

    name: str
    label: str
    description: str
    parameters: dict[str, Any]
    execute: ToolExecute


@dataclass(frozen=True)
class CommandDefinition:
    """pi's ``registerCommand``: ``/name args`` calls ``handler(args)``."""

    name: str
    description: str
    handler: CommandHandler


@dataclass(frozen=True)
class InjectedMessage:
    """A ``before_agent_start`` handler's ``{message: {customType, content, display, details}}``."""

    custom_type: str
    content: str
    display: bool = True
    details: Any = None


@dataclass(frozen=True)
class ExecResult:
    """pi's ``exec`` result: ``{stdout, stderr, code, killed}``."""

    stdout: str
    stderr: str
    code: int | None
    killed: bool = False


class Host(Protocol):
    """The API a bridge extension gets; every method maps to one pi ``ExtensionAPI`` call."""

    def register_tool(self, tool: ToolDefinition) -> None: ...

    def register_command(self, command: CommandDefinition) -> None: ...

    def on(self, event: str, handler: EventHandler) -> Callable[[], None]: ...

    def send_message(self, custom_type: str, content: str, *, display: bool = True,
                     details: Any = None, deliver_as: DeliverAs | None = None,
                     trigger_turn: bool = False) -> None: ...

    def send_user_message(self, content: str, *, deliver_as: DeliverAs | None = None) -> None: ...

    async def exec(self, argv: Sequence[str], *, timeout_ms: int | None = None,
                   env: Mapping[str, str] | None = None) -> ExecResult: ...

    def stderr(self, line: str) -> None: ...


# --- a real subprocess runner ------------------------------------------------------------------

KILL_GRACE_S = 1.0
EXEC_START_FAILED = 1
"""pi 1.x's ``exec`` code for a program that could not start (ENOENT, EACCES)."""


async def run_subprocess(argv: Sequence[str], *, timeout_ms: int | None = None,
                         env: Mapping[str, str] | None = None) -> ExecResult:
    """Run ``argv`` to completion; past ``timeout_ms`` kill its process group (TERM, then KILL).

    The code follows pi 1.x's ``exec`` (the host stands in for pi; docs/aligned-copies.md): a
    program that cannot start is a result with code 1 and the reason on stderr, not an
    exception; one killed by a signal reports ``128 + n`` (143 for SIGTERM), as a shell would.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=dict(env) if env is not None else None,
            start_new_session=True)
    except (FileNotFoundError, PermissionError) as exc:
        return ExecResult("", f"{argv[0]}: {exc.strerror or exc}", EXEC_START_FAILED)
    communicate = asyncio.ensure_future(proc.communicate())
    timeout = timeout_ms / 1000 if timeout_ms else None
    try:
        out, err = await asyncio.wait_for(asyncio.shield(communicate), timeout)
        killed = False
    except TimeoutError:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            out, err = await asyncio.wait_for(asyncio.shield(communicate), KILL_GRACE_S)
        except TimeoutError:
            _signal_group(proc.pid, signal.SIGKILL)
            out, err = await communicate
        killed = True
    except asyncio.CancelledError:
        _signal_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await communicate
        raise
    return ExecResult(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                      exec_exit_code(proc.returncode), killed)


def exec_exit_code(returncode: int | None) -> int:
    """pi's ``exec`` code for a finished child: its status, or ``128 + n`` for signal ``n``."""
    if returncode is None:
        return EXEC_START_FAILED
    return 128 - returncode if returncode < 0 else returncode


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


# --- the recording host ------------------------------------------------------------------------

ExecImpl = Callable[..., Awaitable[ExecResult]]


@dataclass
class RecordingHost:
    """An in-memory :class:`Host`: keeps what was registered and records every effect in order.

    The driver-side methods (:meth:`emit`, :meth:`call_tool`, :meth:`run_command`) play pi's part.
    ``exec_impl`` replaces the real subprocess (tests script it); ``echo_stderr`` also copies the
    bridge's stderr lines to this process's stderr.
    """

    exec_impl: ExecImpl = run_subprocess
    echo_stderr: bool = False
    effects: list[dict[str, Any]] = field(default_factory=list)
    tools: dict[str, ToolDefinition] = field(default_factory=dict)
    commands: dict[str, CommandDefinition] = field(default_factory=dict)
    handlers: dict[str, list[EventHandler]] = field(default_factory=dict)
    _last_effect_at: float = field(default_factory=time.monotonic)

    def _record(self, kind: str, **fields: Any) -> None:
        self.effects.append({"kind": kind, **fields})
        self._last_effect_at = time.monotonic()

    # -- Host -------------------------------------------------------------------------------

    def register_tool(self, tool: ToolDefinition) -> None:
        self.tools[tool.name] = tool
        self._record("tool_registered", name=tool.name, description=tool.description,
                     parameters=tool.parameters)

    def register_command(self, command: CommandDefinition) -> None:
        self.commands[command.name] = command
        self._record("command_registered", name=command.name, description=command.description)

    def on(self, event: str, handler: EventHandler) -> Callable[[], None]:
        self.handlers.setdefault(event, []).append(handler)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self.handlers.get(event, []).remove(handler)

        return unsubscribe

    def send_message(self, custom_type: str, content: str, *, display: bool = True,
                     details: Any = None, deliver_as: DeliverAs | None = None,
                     trigger_turn: bool = False) -> None:
        self._record("message", custom_type=custom_type, content=content, display=display,
                     details=details, deliver_as=deliver_as, trigger_turn=trigger_turn)

    def send_user_message(self, content: str, *, deliver_as: DeliverAs | None = None) -> None:
        self._record("user_message", content=content, deliver_as=deliver_as)

    async def exec(self, argv: Sequence[str], *, timeout_ms: int | None = None,
                   env: Mapping[str, str] | None = None) -> ExecResult:
        result = await self.exec_impl(list(argv), timeout_ms=timeout_ms, env=env)
        self._record("exec", argv=list(argv), exit_code=result.code, timed_out=result.killed)
        return result

    def stderr(self, line: str) -> None:
        self._record("stderr", line=line)
        if self.echo_stderr:
            print(line, file=sys.stderr, flush=True)

    # -- pi's side --------------------------------------------------------------------------

    async def emit(self, event: str, payload: Mapping[str, Any] | None = None) -> list[Any]:
        """Fire ``event`` at every handler in subscription order; a raising handler is recorded.

        Returns the handlers' non-None results; for ``before_agent_start`` those are the
        :class:`InjectedMessage` objects, each also recorded as an ``injected`` effect.
        """
        results = []
        for handler in list(self.handlers.get(event, [])):
            try:
                result = await handler(dict(payload or {}))
            except Exception as exc:
                self._record("error", where=event, message=f"{type(exc).__name__}: {exc}")
                continue
            if result is None:
                continue
            if isinstance(result, InjectedMessage):
                self._record("injected", custom_type=result.custom_type, content=result.content)
            results.append(result)
        return results

    async def call_tool(self, name: str, args: dict[str, Any] | None = None,
                        call_id: str = "call-1") -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            raise KeyError(f"no tool registered as {name!r}")
        return await tool.execute(call_id, dict(args or {}))

    async def run_command(self, name: str, args: str = "") -> None:
        command = self.commands.get(name)
        if command is None:
            raise KeyError(f"no command registered as {name!r}")
        await command.handler(args)

    async def settle(self, quiet_ms: float = 200, max_ms: float = 5000) -> None:
        """Wait until no effect arrived for ``quiet_ms`` (or ``max_ms`` passed)."""
        deadline = time.monotonic() + max_ms / 1000
        while time.monotonic() < deadline:
            idle = time.monotonic() - self._last_effect_at
            if idle >= quiet_ms / 1000:
                return
            await asyncio.sleep(min(quiet_ms / 1000 - idle, deadline - time.monotonic(), 0.05)
                                + 0.001)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.effects if e["kind"] == kind]
