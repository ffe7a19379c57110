"""The remote palace's wire: one POST per message over httpx (MCP Streamable HTTP, client side).

Every request carries ``Accept: application/json, text/event-stream`` and, when configured,
``Authorization: Bearer <token>`` (HTTP-01). A response may be one JSON object or an SSE stream
(comments and slow events included, HTTP-10); on a stream the server may ping us first, and we
answer, and refuse any other request at once (-32601, :func:`.jsonrpc.answer_server_request`).
No idle GET stream is ever opened (HTTP-07). Protocol breakage fails fast instead of hanging: a 202
to a request, a wrong content type, bad JSON. A stream that ends before our answer is resumed as
the MCP spec says, with ``GET`` + ``Last-Event-ID`` after the server's ``retry`` (HTTP-12; when
and how often is :mod:`.resume`'s decision); that GET belongs to one call and ends with it, so it
is not the idle stream HTTP-07 forbids. A stream with no event id still fails the call at once.

This module reports what happened (status, session id, the JSON-RPC answer); the session rules that
judge it live in :mod:`.session`. No POST goes out without a deadline: a request's is applied by
the caller, a notification's is an argument of :meth:`HttpTransport.post_message`, and the answers
this module sends on its own take ``message_deadline()`` (the policy's budget for messages nobody
waits on).

choice: at most ``MAX_ANSWERS_IN_FLIGHT`` answers to server requests are being POSTed at a time;
a server request arriving while that many are open is dropped unanswered (one debug line per
stream). Answering it with a JSON-RPC error would need the very POST that is overloaded, and a
server already has to time out a request its client never answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from . import jsonrpc
from .clock import SYSTEM_CLOCK
from .deadlines import Deadline, TimeoutPolicy
from .errors import (
    HTML_ERROR_PAGE,
    PalaceConnectionClosed,
    PalaceProtocolError,
    PalaceTimeout,
    PalaceUnavailable,
)
from .jsonrpc import Invalid, Notification, Response, ServerRequest
from .log import Log
from .resume import GiveUp, StreamResume
from .session import SESSION_HEADER
from .sse import SSEDecoder, SSEEventTooLarge
from .version import __version__

ACCEPT = "application/json, text/event-stream"
LAST_EVENT_ID = "Last-Event-ID"
MAX_BODY = 64 * 1024 * 1024
MAX_EVENT = MAX_BODY  # one SSE line or event, in characters
CONNECT_TIMEOUT_S = 10.0
Send = Callable[[httpx.Request], Awaitable[httpx.Response]]
DELETE_TIMEOUT_S = 1.0
CLOSE_WAIT_S = 1.0  # aclose(): how long cancelled answer tasks get to finish
#: answers to server requests being POSTed at once; more requests on a stream are dropped
MAX_ANSWERS_IN_FLIGHT = 4


@dataclass(frozen=True)
class HttpReply:
    """One POST's outcome: the status, any session id, and our request's JSON-RPC answer."""

    status: int
    session_id: str | None = None
    response: Response | None = None
    detail: str = ""

    @property
    def rpc_error(self) -> dict[str, Any] | None:
        return self.response.error if self.response is not None else None


class HttpTransport:
    """POSTs JSON-RPC messages to the palace URL and reads JSON or SSE answers."""

    def __init__(self, url: str, token: str | None, log: Log, *,
                 message_deadline: Callable[[], Deadline] | None = None,
                 client: httpx.AsyncClient | None = None) -> None:
        self.url = url
        self.log = log
        self._token = token
        self._message_deadline = message_deadline or (
            lambda: TimeoutPolicy(0, 0).for_message(SYSTEM_CLOCK))
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S),
            follow_redirects=False,
            trust_env=False,
            # a plain-http palace never does TLS (every request goes to this URL, redirects are
            # not followed), so it needs no CA bundle: loading certifi's blocks the host's event
            # loop for 50-200 ms per client
            verify=urlsplit(url).scheme.lower() != "http",
        )
        self._tasks: set[asyncio.Task[Any]] = set()

    def _headers(self, extra: dict[str, str], *, body: bool = True) -> dict[str, str]:
        headers = {"Accept": ACCEPT, "User-Agent": f"palace-bridge/{__version__}"}
        if body:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        headers.update(extra)
        return headers

    # -- requests ----------------------------------------------------------------------------

    async def post_request(self, message: dict[str, Any], headers: dict[str, str],
                           deadline: Deadline | None = None) -> HttpReply:
        """POST one request and return its answer; never waits past the end of the body (or of
        the streams resuming it). ``deadline`` is the call's, which the caller enforces; here it
        only bounds the resumption of an early-closed stream (None: no deadline)."""
        method = message["method"]
        request_id = message["id"]
        request = self._client.build_request(
            "POST", self.url, content=jsonrpc.encode(message)[:-1], headers=self._headers(headers))
        async with self._exchange(method) as send:
            response = await send(request)
            try:
                return await self._read_reply(response, method, request_id, headers, deadline)
            finally:
                await response.aclose()

    async def post_message(self, message: dict[str, Any], headers: dict[str, str],
                           deadline: Deadline) -> int:
        """POST a notification or a response; any 2xx is fine (MCP says 202, some servers send
        200 or 204). Returns the status; :class:`PalaceTimeout` once ``deadline`` passes."""
        request = self._client.build_request(
            "POST", self.url, content=jsonrpc.encode(message)[:-1], headers=self._headers(headers))
        name = message.get("method") or "response"
        try:
            async with asyncio.timeout(deadline.remaining_s()), self._exchange(name) as send:
                response = await send(request)
                try:
                    await _read_limited(response)
                finally:
                    await response.aclose()
                return response.status_code
        except TimeoutError:
            raise PalaceTimeout(name, deadline.timeout_ms) from None

    async def delete(self, headers: dict[str, str]) -> int | None:
        """Best-effort session end (MCP: a DELETE with the session id); 405/501 and failures
        are fine (LIFE-06)."""
        try:
            response = await asyncio.wait_for(
                self._client.delete(self.url, headers=self._headers(headers, body=False)),
                DELETE_TIMEOUT_S)
        except (httpx.HTTPError, TimeoutError, OSError) as exc:
            self.log.debug(f"DELETE failed ({type(exc).__name__}); the session ends anyway")
            return None
        return response.status_code

    async def aclose(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_WAIT_S)
        await self._client.aclose()

    # -- internals ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _exchange(self, what: str) -> AsyncIterator[Send]:
        """Map httpx's failures onto the palace errors (no token or headers in any message)."""

        async def send(request: httpx.Request) -> httpx.Response:
            return await self._client.send(request, stream=True)

        try:
            yield send
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise PalaceUnavailable(
                f"cannot reach the remote palace at {_origin(self.url)} "
                f"({_reason(exc)})") from None
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError,
                httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout) as exc:
            raise PalaceConnectionClosed(
                f"{what} to {_origin(self.url)} failed mid-exchange ({_reason(exc)})") from None
        except httpx.HTTPError as exc:
            raise PalaceConnectionClosed(f"{what} failed ({_reason(exc)})") from None

    async def _read_reply(self, response: httpx.Response, method: str, request_id: Any,
                          headers: dict[str, str], deadline: Deadline | None = None) -> HttpReply:
        status = response.status_code
        session_id = response.headers.get(SESSION_HEADER)
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if not 200 <= status < 300:
            body = await _read_limited(response)
            return HttpReply(status, session_id, _error_body(body, content_type),
                             _excerpt(body, content_type))
        if status in (202, 204) or content_type == "":
            await _read_limited(response)
            raise PalaceProtocolError(
                f"HTTP {status} with no JSON-RPC body in answer to the {method} request")
        if content_type == "application/json":
            body = await _read_limited(response)
            return HttpReply(status, session_id, _json_answer(body, method, request_id))
        if content_type == "text/event-stream":
            resume = StreamResume(deadline or Deadline.start(SYSTEM_CLOCK, 0))
            answer = await self._read_stream(response, method, request_id, headers, resume)
            return HttpReply(status, session_id, answer)
        await _read_limited(response)
        raise PalaceProtocolError(
            f"unexpected content type {content_type!r} in answer to {method} "
            "(expected application/json or text/event-stream)")

    async def _read_stream(self, response: httpx.Response, method: str, request_id: Any,
                           headers: dict[str, str], resume: StreamResume) -> Response:
        """Our answer from this SSE stream, or from the GETs that resume it (HTTP-12)."""
        decoder = SSEDecoder(MAX_EVENT)
        stream = response  # the POST's own stream (its caller closes it), then each GET's
        try:
            while True:
                answer = await self._read_events(stream, decoder, method, request_id, headers)
                if answer is not None:
                    return answer
                decision = resume.on_stream_end(decoder.last_event_id, decoder.retry_ms)
                if isinstance(decision, GiveUp):
                    raise PalaceProtocolError(
                        f"SSE stream ended without a response to {method} ({decision.reason})")
                self.log.debug(f"{method}: SSE stream ended before the response; resuming "
                               f"after {decision.delay_ms} ms from event "
                               f"{decision.last_event_id!r}")
                await asyncio.sleep(decision.delay_ms / 1000.0)
                await stream.aclose()
                stream = await self._resume_get(decision.last_event_id, method, headers)
                decoder = decoder.resumed()
        finally:
            if stream is not response:
                await stream.aclose()

    async def _resume_get(self, last_event_id: str, method: str,
                          headers: dict[str, str]) -> httpx.Response:
        """The GET that resumes a stream: session headers and ``Last-Event-ID``; an answer other
        than a 2xx event stream fails the call (the server cannot replay)."""
        request = self._client.build_request(
            "GET", self.url, headers={**self._headers({**headers, LAST_EVENT_ID: last_event_id},
                                                      body=False), "Accept": "text/event-stream"})
        response = await self._client.send(request, stream=True)
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if 200 <= response.status_code < 300 and content_type == "text/event-stream":
            return response
        try:
            await _read_limited(response)
        finally:
            await response.aclose()
        raise PalaceProtocolError(
            f"SSE stream for {method} ended early and resuming it failed: GET with "
            f"Last-Event-ID answered HTTP {response.status_code} {content_type or 'no body'}")

    async def _read_events(self, response: httpx.Response, decoder: SSEDecoder, method: str,
                           request_id: Any, headers: dict[str, str]) -> Response | None:
        """Read one stream to our answer (returned) or to its end (None)."""
        size = 0
        dropped = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_BODY:
                raise PalaceProtocolError(f"SSE answer to {method} exceeded {MAX_BODY} bytes")
            try:
                events = decoder.feed(chunk)
            except SSEEventTooLarge as exc:
                raise PalaceProtocolError(f"SSE answer to {method}: {exc}") from None
            for event in events:
                if event.event != "message" or not event.data.strip():
                    continue  # other event types and empty keep-alives: ignored
                message = jsonrpc.parse(event.data)
                if isinstance(message, Response):
                    if jsonrpc.id_key(message.id) == jsonrpc.id_key(request_id):
                        return message
                    self.log.debug(f"ignoring an SSE response for id {message.id!r}")
                elif isinstance(message, ServerRequest):
                    if len(self._tasks) < MAX_ANSWERS_IN_FLIGHT:
                        self._answer_soon(message, headers)
                    else:
                        if not dropped:
                            self.log.debug(f"{MAX_ANSWERS_IN_FLIGHT} answers to server requests "
                                           "in flight; dropping further server requests")
                        dropped += 1
                elif isinstance(message, Notification):
                    self.log.debug(f"notification {message.method}")
                elif isinstance(message, Invalid):  # dropped, as a malformed stdio line is
                    self.log.debug(f"dropping bad SSE data in the answer to {method}: "
                                   f"{message.reason}")
        return None

    def _answer_soon(self, message: ServerRequest, headers: dict[str, str]) -> None:
        """Answer a server request seen on a stream, at once (TOOL-07): ``ping`` → ``{}``,
        anything else -32601, so a server awaiting it (an elicitation) is not left waiting."""
        answer = jsonrpc.answer_server_request(message)

        async def post() -> None:
            with contextlib.suppress(Exception):
                await self.post_message(answer, headers, self._message_deadline())

        task = asyncio.create_task(post())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _read_limited(response: httpx.Response) -> bytes:
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) > MAX_BODY:
            raise PalaceProtocolError(f"answer body exceeded {MAX_BODY} bytes")
    return bytes(data)


def _json_answer(body: bytes, method: str, request_id: Any) -> Response:
    message = jsonrpc.parse(body)
    if isinstance(message, Invalid):
        raise PalaceProtocolError(f"answer to {method} is not valid JSON-RPC ({message.reason})")
    if not isinstance(message, Response):
        raise PalaceProtocolError(f"answer to {method} is not a JSON-RPC response")
    if message.id is None and message.error is not None:
        return message  # an error with a null id (e.g. -32700): this POST's request
    if jsonrpc.id_key(message.id) != jsonrpc.id_key(request_id):
        raise PalaceProtocolError(
            f"answer to {method} carries id {message.id!r}, not the request's {request_id!r}")
    return message


def _error_body(body: bytes, content_type: str) -> Response | None:
    if content_type != "application/json" or not body:
        return None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, nested too deeply or too long a number
        return None
    message = jsonrpc.classify(data)
    return message if isinstance(message, Response) and message.error is not None else None


def _excerpt(body: bytes, content_type: str) -> str:
    if content_type == "text/html":
        return HTML_ERROR_PAGE
    text = " ".join(body[:200].decode(errors="replace").split())
    return text


def _origin(url: str) -> str:
    parsed = httpx.URL(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
