"""The remote palace: one MCP session over HTTP, held and healed as ADR-044 says.

Glue between :class:`~.session.HttpSession` (the rules), :class:`~.connect.ConnectRetries` and
:class:`~.http.HttpTransport` (the wire). The session preamble, when configured, is the first call
on every new session, including a replacement after a 404 (HTTP-05); a keep-alive ping holds the
session and a 404 on it replaces the session before the next call (HTTP-06). Never a local child:
this engine cannot spawn one (LIFE-02, fail-closed).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx

from .clock import SYSTEM_CLOCK, Clock
from .config import BridgeConfig
from .connect import UNAVAILABLE_LINE, ConnectRetries
from .deadlines import Deadline, TimeoutPolicy
from .errors import (
    PalaceAuthError,
    PalaceError,
    PalaceHTTPError,
    PalaceProtocolError,
    PalaceSessionLost,
    PalaceTimeout,
    PalaceUnavailable,
    describe,
)
from .handshake import check_initialize, initialize_params, list_tools
from .http import HttpReply, HttpTransport
from .jsonrpc import IdAllocator, Response, notification, request
from .log import Log
from .session import HttpSession, Verdict
from .tools import ToolSpec

CANCEL_WAIT_S = 1.0


class RemoteEngine:
    remote = True

    def __init__(self, config: BridgeConfig, log: Log, *, clock: Clock = SYSTEM_CLOCK,
                 transport: HttpTransport | None = None) -> None:
        assert config.remote_url, "RemoteEngine needs MEMPALACE_REMOTE_URL"
        self.config = config
        self.log = log
        self.clock = clock
        self.timeouts = TimeoutPolicy(config.timeout_ms, config.init_timeout_ms)
        self.transport = transport or HttpTransport(
            config.remote_url, config.remote_token, log,
            message_deadline=lambda: self.timeouts.for_message(self.clock))
        self.session = HttpSession()
        self.ids = IdAllocator()
        self.tools: list[ToolSpec] = []
        self._preamble = config.preamble
        self._renew_lock = asyncio.Lock()
        self._start_lock = asyncio.Lock()
        self._started: bool | None = None
        self.start_error: PalaceError | None = None  # why the first start gave up
        self._stopped = False
        self._keepalive: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def available(self) -> bool:
        return bool(self._started) and not self._stopped

    @property
    def child_pids(self) -> list[int]:
        return []  # fail-closed: there is never a local process

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> bool:
        """Connect with bounded retries; after the last one, the seed's line and ``False``."""
        async with self._start_lock:
            if self._started is not None:
                return self._started
            problem = url_problem(self.config.remote_url or "")
            if problem:
                self.log.line(f"mempalace: MEMPALACE_REMOTE_URL {problem}; set the full URL "
                              "including /mcp, e.g. https://palace.example/mcp")
                self.log.line(UNAVAILABLE_LINE)
                self.start_error = PalaceUnavailable(f"MEMPALACE_REMOTE_URL {problem}")
                self._started = False
                return False
            retries = ConnectRetries(self.config.connect_retries, self.config.connect_backoff_ms)
            while True:
                try:
                    await self._open_session(list_tools_too=True)
                    break
                except PalaceError as exc:
                    delay = retries.on_failure(describe(exc))
                    self.log.debug(f"connect attempt {retries.attempts} failed: {describe(exc)}")
                    if delay is None or self._stopped:
                        self.start_error = exc
                        self.log.line(UNAVAILABLE_LINE)
                        self._started = False
                        return False
                    await asyncio.sleep(delay / 1000.0)
            self._started = True
            if self.config.keepalive_ms > 0:
                self._keepalive = asyncio.create_task(self._keep_alive())
            return True

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._keepalive is not None:
            self._keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keepalive
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=CANCEL_WAIT_S)
        if self.session.session_id is not None:
            status = await self.transport.delete(self.session.headers("DELETE"))
            self.log.debug(f"DELETE session -> {status}")
        await self.transport.aclose()

    # -- requests --------------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None,
                      timeout_ms: int | None = None) -> Response:
        """One call on the session: renewed first if it was lost, retried once after a 404."""
        if self._started is None:
            await self.start()
        if not self._started:
            raise PalaceUnavailable("the remote palace was unreachable at start "
                                    "(fail-closed: no local fallback)")
        if self._stopped:
            raise PalaceUnavailable("the palace client was stopped")
        attempt = 0
        while True:
            if self.session.needs_init:
                await self._renew()
            deadline = self.timeouts.for_request(self.clock, timeout_ms)
            sent = self.session.sent(method)
            reply = await self._post(method, params, deadline)
            verdict = self.session.judge(reply.status, sent, attempt)
            if verdict in (Verdict.RENEW_AND_RETRY, Verdict.RETRY_ON_CURRENT):
                self.log.debug(f"{method}: HTTP 404 on session; new session, retrying once")
                attempt += 1
                continue
            return self._accept(verdict, reply, method)

    # -- internals -------------------------------------------------------------------------------

    async def _open_session(self, *, list_tools_too: bool) -> None:
        """``initialize`` (no session id), ``initialized``, [``tools/list``], preamble."""
        deadline = self.timeouts.for_handshake(self.clock)
        self.session.begin_initialize()
        reply = await self._post("initialize", initialize_params(), deadline)
        sent = self.session.sent("initialize")
        response = self._accept(self.session.judge(reply.status, sent, 1), reply, "initialize")
        init = check_initialize(response)
        self.session.on_initialized(reply.session_id, init.protocol_version)
        await self._notify("notifications/initialized", deadline)
        if list_tools_too:
            self.tools = await list_tools(self._send_once, deadline, self.log)
        if self._preamble is not None:
            tool, arguments = self._preamble
            preamble = await self._send_once("tools/call", {"name": tool, "arguments": arguments},
                                             self.timeouts.for_request(self.clock))
            if preamble.error is not None:
                raise PalaceUnavailable(
                    f"session preamble {tool} failed: {preamble.error.get('message')}")

    async def _renew(self) -> None:
        """Replace a lost session, once, however many calls noticed the loss."""
        async with self._renew_lock:
            if not self.session.needs_init:
                return
            await self._open_session(list_tools_too=False)

    async def _send_once(self, method: str, params: dict[str, Any] | None,
                         deadline: Deadline) -> Response:
        """A request inside a handshake: no renewal, no retry (a 404 here is final)."""
        sent = self.session.sent(method)
        reply = await self._post(method, params, deadline)
        return self._accept(self.session.judge(reply.status, sent, 1), reply, method)

    async def _post(self, method: str, params: dict[str, Any] | None,
                    deadline: Deadline) -> HttpReply:
        request_id = self.ids.next()
        headers = self.session.headers(method)
        try:
            async with asyncio.timeout(deadline.remaining_s()):
                return await self.transport.post_request(request(request_id, method, params),
                                                         headers, deadline)
        except TimeoutError:
            if method != "initialize":  # MCP: a client never cancels initialize
                self._cancel_soon(request_id, headers)
            raise PalaceTimeout(method, deadline.timeout_ms) from None

    def _accept(self, verdict: Verdict, reply: HttpReply, method: str) -> Response:
        if verdict is Verdict.OK:
            if reply.response is None:
                raise PalaceProtocolError(f"no JSON-RPC answer to {method}")
            return reply.response
        if verdict is Verdict.AUTH:
            raise PalaceAuthError(reply.status, reply.detail)
        if verdict is Verdict.SESSION_LOST:
            raise PalaceSessionLost(f"{method} got HTTP {reply.status} twice")
        raise PalaceHTTPError(reply.status, reply.rpc_error, reply.detail)

    async def _notify(self, method: str, deadline: Deadline,
                      params: dict[str, Any] | None = None) -> None:
        """A notification inside a handshake or call: it shares that ``deadline``."""
        status = await self.transport.post_message(notification(method, params),
                                                   self.session.headers(method), deadline)
        if not 200 <= status < 300:
            if status == 401:
                raise PalaceAuthError(status)
            raise PalaceHTTPError(status, detail=f"{method} refused")

    def _cancel_soon(self, request_id: int, headers: dict[str, str]) -> None:
        """Tell the server we stopped waiting (HTTP-11, MCP's timeout rule); fire and forget."""
        message = notification("notifications/cancelled",
                               {"requestId": request_id, "reason": "Request timed out"})

        async def send() -> None:
            try:
                await self.transport.post_message(message, headers,
                                                  self.timeouts.for_message(self.clock))
            except PalaceError as exc:
                self.log.debug(f"cancel notice for {request_id} not delivered: {exc}")

        task = asyncio.create_task(send())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _keep_alive(self) -> None:
        """Ping every ``keepalive_ms`` on the session; a 404 replaces the session now."""
        interval = self.config.keepalive_ms / 1000.0
        while not self._stopped:
            await asyncio.sleep(interval)
            try:
                if self.session.needs_init:
                    await self._renew()
                    continue
                sent = self.session.sent("ping")
                reply = await self._post("ping", None, self.timeouts.for_request(self.clock))
                if reply.status == 404 and self.session.on_ping_not_found(sent):
                    self.log.debug("keep-alive ping: HTTP 404; replacing the session")
                    await self._renew()
                elif not 200 <= reply.status < 300:
                    self.log.debug(f"keep-alive ping: HTTP {reply.status}")
            except PalaceError as exc:
                self.log.debug(f"keep-alive ping failed: {describe(exc)}")


def url_problem(url: str) -> str | None:
    """What is wrong with the configured URL, without echoing it (it may hold credentials)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "is not a valid URL"
    if parsed.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parsed.host:
        return "has no host"
    return None
