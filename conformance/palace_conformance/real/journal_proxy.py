"""The real HTTP server's journal: the recorder's loopback reverse proxy (``relay/http.py``),
journaling each exchange in the fake's format, run in a thread of the runner.

A bridge in remote mode is given this proxy's URL. Per request it journals what the HTTP fake
journals: ``http_request`` (method, path, headers with credentials redacted, connection number),
``recv`` for each JSON-RPC message of the body, ``send`` for each message of the answer and
``http_response`` (status, headers). ``Host`` is rewritten to the server's (the real server
answers 403 to any other), as the recorder does. Raw-HTTP checks do not go through here: a proxy
reads a body before the server decides, so status-code checks hit the server directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import threading
from typing import Any

from palace_conformance.fake.http.wire import Headers, RequestHead
from palace_conformance.fake.journal import Journal, redact_headers
from palace_conformance.real.journal_relay import recv_fields, send_fields
from palace_conformance.relay.http import HttpRelay
from palace_conformance.relay.stdio import TO_PALACE, Message

START_S = 15.0
#: the request being relayed, in its connection's task (and the exchange task it starts): what
#: the fake adds to a ``recv`` and ``http_response`` (``conn``, and ``http`` to a ``recv``)
_REQUEST: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("request")


class _JournalingRelay(HttpRelay):
    def __init__(self, upstream: str, journal: Journal) -> None:
        super().__init__(upstream, self._message)
        self.journal = journal
        self._conns = itertools.count(1)

    def _message(self, message: Message) -> None:
        line = json.dumps(message.message).encode()
        request = _REQUEST.get({})
        if message.direction == TO_PALACE:
            self.journal.record("recv", **recv_fields(line), **request)
        else:
            self.journal.record("send", **send_fields(line))

    def seen_request(self, head: RequestHead) -> None:
        headers = redact_headers(head.headers)
        conn = next(self._conns)
        _REQUEST.set({"http": {"method": head.method, "path": head.path, "headers": headers},
                      "conn": conn})
        self.journal.record("http_request", method=head.method, path=head.path,
                            headers=headers, conn=conn)

    def seen_response(self, status: int, headers: Headers) -> None:
        conn = _REQUEST.get({}).get("conn")
        self.journal.record("http_response", status=status, headers=redact_headers(headers),
                            conn=conn)


class JournalProxy:
    """:meth:`start` serves on an ephemeral loopback port (:attr:`url`); :meth:`stop` ends it."""

    def __init__(self, upstream: str, journal: Journal) -> None:
        self.relay = _JournalingRelay(upstream, journal)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="real-proxy", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return self.relay.url

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.relay.start())
        except BaseException as exc:  # reported by start(); the thread ends
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(self.relay.serve())
        self._finish_tasks()
        self._loop.close()

    def _finish_tasks(self) -> None:
        """Cancel and await what is still pending (a connection's hang-up watch, an exchange
        that outlived the relay's close grace): a loop closed over a pending task makes the
        interpreter print "Task was destroyed but it is pending!" at exit."""
        pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.wait(pending, timeout=START_S))

    def start(self) -> str:
        self._thread.start()
        if not self._ready.wait(START_S) or self._error is not None:
            raise OSError(f"the journaling proxy did not start: {self._error or 'timeout'}")
        return self.url

    def stop(self) -> None:
        if self._thread.is_alive() and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self.relay.stop)
        self._thread.join(START_S)
