"""Mutants of HTTP: the remote palace (auth, sessions, retries, cancellation)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from palace_conformance.selftest.mutants.model import Mutant
from palace_conformance.selftest.mutants.patching import (
    REMOTE,
    SESSION,
    answers,
    answers_later,
    mutant,
)


def _404_retried_twice(original: Any) -> Any:
    def judge(self: Any, status: int, sent: Any, attempt: int) -> Any:
        if status == 404 and attempt == 1 and sent.session_id is not None:
            attempt = 0  # the retry is judged as if it were the first try
        return original(self, status, sent, attempt)

    return judge


def _404_never_retried(original: Any) -> Any:
    def judge(self: Any, status: int, sent: Any, attempt: int) -> Any:
        if status == 404 and sent.session_id is not None:
            attempt = max(attempt, 1)  # the first 404 is judged as if it were the retry's
        return original(self, status, sent, attempt)

    return judge


def _generation_never_advances(original: Any) -> Any:
    def on_initialized(self: Any, session_id: str | None, protocol_version: str) -> None:
        original(self, session_id, protocol_version)
        self.generation -= 1  # every session looks like the first: a stale 404 is not told apart

    return on_initialized


def _stale_404_forgets(original: Any) -> Any:
    def forget(self: Any, sent: Any) -> None:
        if sent.generation <= self.generation:  # any older session's failure drops the current
            self.session_id = None
            self.needs_init = True

    return forget


def _401_renews(original: Any) -> Any:
    from palace_bridge.session import Verdict

    def judge(self: Any, status: int, sent: Any, attempt: int) -> Any:
        if status == 401 and attempt == 0:
            self.session_id = None
            self.needs_init = True
            return Verdict.RENEW_AND_RETRY
        return original(self, status, sent, attempt)

    return judge


def _5xx_replayed(original: Any) -> Any:
    from palace_bridge.session import Verdict

    def judge(self: Any, status: int, sent: Any, attempt: int) -> Any:
        if 500 <= status < 600 and attempt == 0:
            return Verdict.RETRY_ON_CURRENT
        return original(self, status, sent, attempt)

    return judge


def _offered_version_sent(original: Any) -> Any:
    from palace_bridge.handshake import PROTOCOL_VERSION

    def on_initialized(self: Any, session_id: str | None, protocol_version: str) -> None:
        original(self, session_id, PROTOCOL_VERSION)  # the version offered, not the one chosen

    return on_initialized


def _session_id_dropped(original: Any) -> Any:
    from palace_bridge.session import SESSION_HEADER

    def headers(self: Any, method: str) -> dict[str, str]:
        found = original(self, method)
        found.pop(SESSION_HEADER, None)
        return dict(found)

    return headers


def _renew_without_preamble(original: Any) -> Any:
    async def _renew(self: Any) -> None:
        saved, self._preamble = self._preamble, None
        try:
            await original(self)
        finally:
            self._preamble = saved

    return _renew


def _get_stream_opened(original: Any) -> Any:
    async def _open_session(self: Any, *, list_tools_too: bool) -> None:
        await original(self, list_tools_too=list_tools_too)
        transport = self.transport
        headers = transport._headers(self.session.headers("GET"), body=False)

        async def listen() -> None:
            with contextlib.suppress(Exception):
                async with transport._client.stream("GET", transport.url,
                                                    headers=headers) as response:
                    async for _ in response.aiter_bytes():
                        pass

        task = asyncio.ensure_future(listen())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    return _open_session


def _cancel_even_initialize(original: Any) -> Any:
    from palace_bridge.errors import PalaceTimeout
    from palace_bridge.jsonrpc import request

    async def _post(self: Any, method: str, params: Any, deadline: Any) -> Any:
        request_id = self.ids.next()
        headers = self.session.headers(method)
        try:
            async with asyncio.timeout(deadline.remaining_s()):
                return await self.transport.post_request(request(request_id, method, params),
                                                         headers)
        except TimeoutError:
            self._cancel_soon(request_id, headers)  # initialize included
            raise PalaceTimeout(method, deadline.timeout_ms) from None

    return _post


def _deadline_ends_at_headers(original: Any) -> Any:
    from palace_bridge import jsonrpc
    from palace_bridge.errors import PalaceTimeout

    async def _post(self: Any, method: str, params: Any, deadline: Any) -> Any:
        request_id = self.ids.next()
        headers = self.session.headers(method)
        transport = self.transport
        message = jsonrpc.request(request_id, method, params)
        built = transport._client.build_request(
            "POST", transport.url, content=jsonrpc.encode(message)[:-1],
            headers=transport._headers(headers))
        async with transport._exchange(method) as send:
            try:
                async with asyncio.timeout(deadline.remaining_s()):
                    response = await send(built)  # the deadline covers the headers only
            except TimeoutError:
                if method != "initialize":
                    self._cancel_soon(request_id, headers)
                raise PalaceTimeout(method, deadline.timeout_ms) from None
            try:
                return await transport._read_reply(response, method, request_id, headers)
            finally:
                await response.aclose()

    return _post




def _cancel_id_stringified(original: Any) -> Any:
    def _cancel_soon(self: Any, request_id: int, headers: dict[str, str]) -> None:
        original(self, str(request_id), headers)  # "7" names no request 7

    return _cancel_soon


def _headers_logged(original: Any) -> Any:
    def _headers(self: Any, extra: dict[str, str], *, body: bool = True) -> dict[str, str]:
        headers: dict[str, str] = original(self, extra, body=body)
        if self.log.debug_enabled:  # a debug line that forgets the redaction
            self.log._write(f"mempalace[debug]: request headers {headers}\n")
        return headers

    return _headers


def _connect_not_retried(original: Any) -> Any:
    class ConnectRetries(original):  # type: ignore[misc]
        def __init__(self, retries: int, backoff_ms: int) -> None:
            super().__init__(0, backoff_ms)

    return ConnectRetries




def _sse_never_resumed(original: Any) -> Any:
    from palace_bridge.resume import GiveUp

    def on_stream_end(self: Any, last_event_id: str | None, retry_ms: int | None) -> Any:
        return GiveUp("this bridge never resumes a stream")

    return on_stream_end


def _sse_retry_ignored(original: Any) -> Any:
    import dataclasses

    def on_stream_end(self: Any, last_event_id: str | None, retry_ms: int | None) -> Any:
        decision = original(self, last_event_id, retry_ms)
        if hasattr(decision, "delay_ms"):
            return dataclasses.replace(decision, delay_ms=0)  # the GET goes out at once
        return decision

    return on_stream_end


#: patches made by the shared makers (patching.py)
_no_keepalive = answers_later(None)
_cancel_never_sent = answers(None)


MUTANTS: tuple[Mutant, ...] = (
    # HTTP
    mutant("http-token-in-debug-log", "HTTP-01",
       "debug mode logs each request's headers, bearer token included",
       ("palace_bridge.http:HttpTransport._headers", _headers_logged)),
    mutant("http-connect-not-retried", "HTTP-02",
       "a failed connect is given up at once, without retries",
       (f"{REMOTE}:ConnectRetries", _connect_not_retried)),
    mutant("http-session-id-not-sent", "HTTP-03",
       "the issued Mcp-Session-Id is never sent back",
       (f"{SESSION}:HttpSession.headers", _session_id_dropped)),
    mutant("http-offered-version-sent", "HTTP-03",
       "later requests carry the protocol version the bridge offered, not the negotiated one",
       (f"{SESSION}:HttpSession.on_initialized", _offered_version_sent)),
    mutant("http-404-retried-twice", "HTTP-04",
       "a 404 on the retried call renews the session and retries again",
       (f"{SESSION}:HttpSession.judge", _404_retried_twice)),
    mutant("http-in-flight-404-renews-again", "HTTP-04",
       "a request sent on the old session whose 404 arrives after another renewed it renews the "
       "session again instead of retrying on the new one",
       (f"{SESSION}:HttpSession.on_initialized", _generation_never_advances)),
    mutant("http-stale-404-forgets-renewed", "HTTP-04",
       "a 404 from a session already replaced forgets its replacement (a needless re-initialize)",
       (f"{SESSION}:HttpSession._forget", _stale_404_forgets)),
    mutant("http-404-never-retried", "HTTP-04",
       "a 404 on a session request fails the call without renewing and retrying",
       (f"{SESSION}:HttpSession.judge", _404_never_retried)),
    mutant("http-preamble-skipped-on-renewal", "HTTP-05",
       "a replacement session after a 404 starts without the session preamble",
       (f"{REMOTE}:RemoteEngine._renew", _renew_without_preamble)),
    mutant("http-no-keepalive", "HTTP-06",
       "the keep-alive ping never runs",
       (f"{REMOTE}:RemoteEngine._keep_alive", _no_keepalive)),
    mutant("http-get-stream-opened", "HTTP-07",
       "an idle GET stream is opened after every initialize",
       (f"{REMOTE}:RemoteEngine._open_session", _get_stream_opened)),
    mutant("http-401-reinitializes", "HTTP-08",
       "a 401 starts a new session and retries",
       (f"{SESSION}:HttpSession.judge", _401_renews)),
    mutant("http-5xx-replayed", "HTTP-09",
       "a call that got a 5xx is sent again",
       (f"{SESSION}:HttpSession.judge", _5xx_replayed)),
    mutant("http-cancel-sent-for-initialize", "HTTP-11",
       "a timed-out initialize gets a notifications/cancelled",
       (f"{REMOTE}:RemoteEngine._post", _cancel_even_initialize)),
    mutant("http-cancel-id-stringified", "HTTP-11",
       "the cancel notice's requestId is the timed-out id as a string",
       (f"{REMOTE}:RemoteEngine._cancel_soon", _cancel_id_stringified)),
    mutant("http-deadline-ends-at-headers", "HTTP-11",
       "the call deadline stops once the answer's headers arrive; a stalled stream is waited out",
       (f"{REMOTE}:RemoteEngine._post", _deadline_ends_at_headers)),
    mutant("http-no-cancel-on-timeout", "HTTP-11",
       "a timed-out call gets no notifications/cancelled",
       (f"{REMOTE}:RemoteEngine._cancel_soon", _cancel_never_sent)),
    mutant("http-sse-not-resumed", "HTTP-12",
       "an answer stream that closes before the response fails the call; no GET resumes it",
       ("palace_bridge.resume:StreamResume.on_stream_end", _sse_never_resumed)),
    mutant("http-sse-retry-ignored", "HTTP-12",
       "a closed answer stream is resumed at once, without waiting the server's retry",
       ("palace_bridge.resume:StreamResume.on_stream_end", _sse_retry_ignored)),
)
