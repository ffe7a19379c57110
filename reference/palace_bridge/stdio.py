"""One local ``mempalace-mcp`` child: spawn, line framing, correlation, stderr drain, clean death.

The child runs in its own process group (and session) so that a kill reaches anything it started
(no orphans), except a grandchild that moved to a session of its own with ``setsid``: no signal to
the group reaches it. Every wait of the ending is bounded (:class:`~.deadlines.ReapBudget`), so such
a grandchild holding a pipe delays nothing past the budget: the pipe is abandoned and closed.
Its stderr is always read, so a chatty server never blocks on a full pipe (STDIO-11); the text is
forwarded only in debug mode. A line that is not JSON-RPC is logged and dropped (STDIO-13). When
stdout closes, every in-flight request fails at once (STDIO-12). Policy (when to kill, whether to
respawn) lives elsewhere: this class only does what it is told.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shutil
import signal
from collections.abc import Callable
from typing import Any

from . import jsonrpc
from .deadlines import Deadline, ReapBudget
from .errors import PalaceConnectionClosed, PalaceTimeout, PalaceUnavailable
from .jsonrpc import Correlator, IdAllocator, Invalid, Notification, Response, ServerRequest
from .log import Log, SplitSecretGuard

READ_CHUNK = 1 << 16
EXIT_CODE_WAIT_S = 0.1  # after stdout EOF, how long to wait for the exit code worth reporting
EXIT_POLL_S = 0.02  # how often the exit status is looked at while waiting for it


class Unspawnable(PalaceUnavailable):
    """The server binary cannot be run at all (not on PATH, not executable)."""


def resolve_command(command: str, env: dict[str, str]) -> str:
    """The executable for ``command``, looked up on the *given* environment's PATH (LIFE-01)."""
    if os.sep in command:
        if os.access(command, os.X_OK) and os.path.isfile(command):
            return command
        raise Unspawnable(f"{command} is not an executable file")
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise Unspawnable(f"{command} not found on PATH")
    return found


class StdioConnection:
    """A spawned child and the JSON-RPC session on its stdin/stdout."""

    def __init__(self, argv: list[str], env: dict[str, str], *, ids: IdAllocator, log: Log,
                 on_result: Callable[[], None] = lambda: None,
                 max_line: int = jsonrpc.DEFAULT_MAX_LINE) -> None:
        self.argv = argv
        self.env = env
        self.ids = ids
        self.log = log
        self.on_result = on_result
        self.max_line = max_line
        self.proc: asyncio.subprocess.Process | None = None
        self.closed_reason: str | None = None
        self._correlator: Correlator[asyncio.Future[Response]] = Correlator()
        self._write_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._stderr: asyncio.Task[None] | None = None
        self._ending: asyncio.Task[None] | None = None

    # -- life --------------------------------------------------------------------------------

    async def spawn(self) -> None:
        executable = resolve_command(self.argv[0], self.env)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                executable, *self.argv[1:], env=self.env,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise Unspawnable(f"cannot run {executable}: {exc.strerror or exc}") from None
        except OSError as exc:
            raise PalaceUnavailable(f"cannot spawn {executable}: {exc.strerror or exc}") from None
        self.log.debug(f"spawned {self.argv[0]} pid {self.proc.pid}")
        self._reader = asyncio.create_task(self._read_stdout())
        self._stderr = asyncio.create_task(self._drain_stderr())

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        """Usable for requests: spawned and stdout still open."""
        return self.proc is not None and not self._closed.is_set()

    @property
    def exited(self) -> bool:
        return self.proc is None or self.proc.returncode is not None

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # -- requests ----------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None,
                      deadline: Deadline) -> Response:
        """Send one request and wait for its answer until ``deadline`` (none if disabled)."""
        if not self.alive:
            raise PalaceConnectionClosed(self.closed_reason or "mempalace-mcp is not running")
        request_id = self.ids.next()
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._correlator.register(request_id, method, future)
        try:
            async with asyncio.timeout(deadline.remaining_s()):
                await self._write(jsonrpc.request(request_id, method, params))
                return await future
        except TimeoutError:
            self._correlator.forget(request_id)
            if method != "initialize":  # MCP: a client never cancels initialize
                self._send_soon(jsonrpc.notification(
                    "notifications/cancelled",
                    {"requestId": request_id, "reason": "Request timed out"}))
            raise PalaceTimeout(method, deadline.timeout_ms) from None
        finally:
            self._correlator.forget(request_id)
            if not future.done():
                future.cancel()

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        if not self.alive:
            raise PalaceConnectionClosed(self.closed_reason or "mempalace-mcp is not running")
        await self._write(jsonrpc.notification(method, params))

    async def _write(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        async with self._write_lock:
            try:
                self.proc.stdin.write(jsonrpc.encode(message))
                await self.proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError, RuntimeError) as exc:
                self._close_session(f"mempalace-mcp stdin closed ({type(exc).__name__})")
                raise PalaceConnectionClosed(self.closed_reason or "stdin closed") from None

    def _send_soon(self, message: dict[str, Any]) -> None:
        """Fire-and-forget write (cancel notices, answers to server requests)."""
        if not self.alive:
            return

        async def send() -> None:
            with contextlib.suppress(PalaceConnectionClosed):
                await self._write(message)

        task = asyncio.create_task(send())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- inbound -----------------------------------------------------------------------------

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        decoder = jsonrpc.LineDecoder(self.max_line)
        reason = "mempalace-mcp closed its stdout"
        try:
            while True:
                chunk = await self.proc.stdout.read(READ_CHUNK)
                if not chunk:
                    break
                try:
                    lines = decoder.feed(chunk)
                except jsonrpc.LineTooLong as exc:
                    reason = f"mempalace-mcp sent an oversized message: {exc}"
                    self.log.line(f"mempalace: {reason}; restarting the server")
                    break
                for line in lines:
                    self._dispatch(jsonrpc.parse(line))
        except (OSError, ValueError) as exc:
            reason = f"reading mempalace-mcp stdout failed: {exc}"
        if decoder.pending:
            self.log.debug(f"dropping {decoder.pending} bytes of an unterminated last line")
        code = await self._exit_code()
        if code is not None:
            reason = f"mempalace-mcp exited with code {code}"
        self._close_session(reason)

    async def _exit_code(self) -> int | None:
        await self._wait_exit(int(EXIT_CODE_WAIT_S * 1000))
        assert self.proc is not None
        return self.proc.returncode

    def _dispatch(self, message: jsonrpc.Message) -> None:
        if isinstance(message, Response):
            match = self._correlator.match(message)
            if match is None:
                self.log.debug(f"ignoring a response for unknown id {message.id!r}")
                return
            _method, future = match
            if message.ok:
                self.on_result()
            if not future.done():
                future.set_result(message)
        elif isinstance(message, ServerRequest):
            self._answer_server_request(message)
        elif isinstance(message, Notification):
            self.log.debug(f"notification {message.method}")
        elif isinstance(message, Invalid):
            self.log.debug(f"dropping a malformed line from mempalace-mcp ({message.reason}): "
                           f"{message.raw[:120]}")

    def _answer_server_request(self, message: ServerRequest) -> None:
        """Answer the child's request at once (TOOL-07): a ping, or -32601 for anything else."""
        self._send_soon(jsonrpc.answer_server_request(message))

    async def _drain_stderr(self) -> None:
        """Read stderr to its end; forwarded in debug mode, with no secret cut in two by a chunk
        boundary (or a UTF-8 character by one)."""
        assert self.proc is not None and self.proc.stderr is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        guard = SplitSecretGuard(self.log.secrets)
        try:
            while True:
                chunk = await self.proc.stderr.read(READ_CHUNK)
                if not chunk:
                    break
                self.log.raw(guard.feed(decoder.decode(chunk)))
        except (OSError, ValueError):
            pass
        finally:
            self.log.raw(guard.feed(decoder.decode(b"", final=True)) + guard.flush())

    def _close_session(self, reason: str) -> None:
        """No more requests on this child: fail every in-flight one now (STDIO-12)."""
        if self._closed.is_set():
            return
        self.closed_reason = reason
        self._closed.set()
        self.log.debug(f"connection closed: {reason}")
        for _id, _method, future in self._correlator.drain():
            if not future.done():
                future.set_exception(PalaceConnectionClosed(reason))

    # -- death -------------------------------------------------------------------------------

    def _signal_group(self, sig: signal.Signals) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    async def _wait_exit(self, timeout_ms: int) -> bool:
        """Whether the child exited within ``timeout_ms``. Its exit status is watched, not
        ``Process.wait()``: that also waits for every pipe to close, which a grandchild holding
        one can put off forever."""
        assert self.proc is not None
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout_ms / 1000.0
        while self.proc.returncode is None:
            if loop.time() >= until:
                return False
            await asyncio.sleep(EXIT_POLL_S)
        return True

    async def terminate(self, grace_ms: int, reason: str = "killed") -> None:
        """SIGTERM the group, SIGKILL it after ``grace_ms`` if still alive, then reap.

        Idempotent: a second caller (say, a failing call while stop() runs) waits for the same
        ending instead of signalling again.
        """
        if self._ending is None:
            self._ending = asyncio.create_task(self._terminate(grace_ms, reason))
        await asyncio.shield(self._ending)

    async def close(self, grace_ms: int) -> None:
        """Polite stop, as MCP's stdio shutdown says: close stdin, wait ``grace_ms``, then
        SIGTERM, then SIGKILL."""
        if self._ending is None:
            self._ending = asyncio.create_task(self._close(grace_ms))
        await asyncio.shield(self._ending)

    async def _terminate(self, grace_ms: int, reason: str) -> None:
        if self.proc is None:
            return
        budget = ReapBudget(grace_ms)
        self._close_session(self.closed_reason or reason)
        if self.proc.returncode is None:
            # a zero grace is no time to act on SIGTERM: SIGKILL at once (docs/choices.md), so
            # whether the child noted a SIGTERM never depends on how fast it ran
            if budget.grace_ms > 0:
                self._signal_group(signal.SIGTERM)
            if budget.grace_ms <= 0 or not await self._wait_exit(budget.grace_ms):
                self.log.debug(f"pid {self.proc.pid} ignored SIGTERM; sending SIGKILL")
                self._signal_group(signal.SIGKILL)
                if not await self._wait_exit(budget.after_kill_ms):
                    self.log.debug(f"pid {self.proc.pid} still not reaped "
                                   f"{budget.after_kill_ms} ms after SIGKILL; leaving it")
        await self._finish(budget)

    async def _close(self, grace_ms: int) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            with contextlib.suppress(OSError, RuntimeError):
                self.proc.stdin.close()
        if not await self._wait_exit(grace_ms):
            await self._terminate(grace_ms, "stopped")
            return
        self._close_session(self.closed_reason or "stopped")
        await self._finish(ReapBudget(grace_ms))

    async def _finish(self, budget: ReapBudget) -> None:
        """After the leader exited: sweep its group, give our readers ``drain_ms`` to reach EOF,
        then abandon them and close every pipe (one may be held by a grandchild out of reach)."""
        self._signal_group(signal.SIGKILL)  # anything the child left behind in its group
        readers = [t for t in (self._reader, self._stderr) if t is not None and not t.done()]
        if readers:
            _done, held = await asyncio.wait(readers, timeout=budget.drain_ms / 1000.0)
            for task in held:
                self.log.debug("a pipe of mempalace-mcp is still held open (by a process "
                               "outside its group?); abandoning it")
                task.cancel()
        for task in list(self._tasks):
            task.cancel()
        self._close_pipes()

    def _close_pipes(self) -> None:
        """Close our ends of stdin, stdout and stderr without waiting for the other ends.
        Only the subprocess transport hands out its pipes (``Process`` keeps it private); each
        pipe is closed on its own, because closing the whole transport would also SIGKILL a
        leader still running, a kill this class sends only through :meth:`_signal_group`."""
        if self.proc is None:
            return
        transport = getattr(self.proc, "_transport", None)
        if isinstance(transport, asyncio.SubprocessTransport):
            for fd in (0, 1, 2):
                pipe = transport.get_pipe_transport(fd)
                if pipe is not None:
                    pipe.close()
        elif self.proc.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                self.proc.stdin.close()

    def kill_now(self) -> None:
        """Last resort when the event loop is going away: SIGKILL the group without waiting."""
        if self.proc is not None and self.proc.returncode is None:
            self._signal_group(signal.SIGKILL)
