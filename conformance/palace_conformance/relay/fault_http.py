"""The HTTP fault relay: a process that owns the real streamable-HTTP ``mempalace`` (its child,
dying with it) and stands in front of it where the HTTP fake would, with the fake's fault plan.

It is the fake's HTTP server (:class:`~palace_conformance.fake.http.server.FakeHttpServer`) with
its palace swapped for the real one. Host, Origin and token checks, the HTTP-only faults
(statuses, resets, SSE framing, lost sessions, a rotated token), stateful sessions when the
scenario asks for them (the real 3.11 server is stateless: the relay keeps the session table, the
real palace answers) and the control API are the fake's; a ``POST /mcp`` that no fault touches
goes up to the real server and its status, headers and body come back as they are, and every
other route (``/healthz``, unknown paths, ``GET /mcp`` without sessions) is the real server's.
With a fault, the real answer is fetched first (unless the fault swallows the request:
``fault_brain.swallowed``) and the fake's ``play()`` frames it.

A request the relay passes up carries the server's own token: after a ``rotate_token`` fault the
bridge's new token opens the relay, which still speaks the old one to the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import httpx

from palace_conformance.fake.brain import Exchange
from palace_conformance.fake.faults import load_plan
from palace_conformance.fake.http.port import Call
from palace_conformance.fake.http.serve import _watch_owner, _write_ready_file
from palace_conformance.fake.http.server import FakeHttpServer, Route, log
from palace_conformance.fake.http.wire import ConnectionGone, Headers, RequestHead
from palace_conformance.fake.journal import Journal
from palace_conformance.fake.playback import flood_stderr, pause, write_stderr
from palace_conformance.fake.sessions import SESSION_HEADER
from palace_conformance.fake.startup import startup_faults
from palace_conformance.loopback import wait_healthy
from palace_conformance.relay import zygote
from palace_conformance.relay.fault_brain import RelayBrain, swallowed
from palace_conformance.relay.fault_stdio import die_with_parent
from palace_conformance.relay.http import SSE_TYPE, EventStream, messages_of, relayed
from palace_conformance.relay.zygote import ZygoteProcess

UPSTREAM_S = 330.0  # one real answer (an event_wait holds up to 300 s)
READY_S = 60.0  # the real HTTP server's cold start, on a loaded machine
STOP_S = 5.0  # how long the real server gets to exit on SIGTERM
#: upstream headers the relay's own framing sets again
RESTAMPED = frozenset({"server", "date"})


def answer_messages(headers: Headers, body: bytes) -> list[Any]:
    """The JSON-RPC messages of a real answer: a JSON body's, or each SSE event's."""
    kind = next((v for k, v in headers if k.lower() == "content-type"), "").lower()
    if SSE_TYPE not in kind:
        return messages_of(body)
    stream = EventStream()
    return [m for data in stream.feed(body + b"\n\n") for m in messages_of(data.encode())]


class FaultRelayServer(FakeHttpServer):
    """The HTTP fake's face, the real server's answers."""

    def __init__(self, brain: RelayBrain, upstream: str, *, token: str | None,
                 sessions: bool, server: subprocess.Popen[bytes] | ZygoteProcess) -> None:
        super().__init__(brain, token=token, sessions=sessions, control=True)
        self.relay_brain = brain
        self.upstream = upstream.rstrip("/")
        self.server_token = token  # what the real server was started with
        self.server = server
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(UPSTREAM_S, connect=10.0))
        self.prefetched: weakref.WeakKeyDictionary[Exchange, dict[str, Any] | None] = (
            weakref.WeakKeyDictionary())
        brain.forward = self.take_prefetched
        #: requests sent up for a connection already reset (the server still gets them)
        self.unanswered: set[asyncio.Task[Any]] = set()

    # -- routing -----------------------------------------------------------------------------

    def _route(self, head: RequestHead) -> tuple[Route, bool]:
        route, needs_token = super()._route(head)
        resumes = head.method == "GET" and head.header("last-event-id") in self.resumable
        if head.path == "/mcp" and (head.method == "POST" or self.stateful or resumes):
            return route, needs_token
        return self._pass_through, False  # the real server decides, its token check included

    async def _pass_through(self, call: Call) -> None:
        assert call.head is not None
        body = await call.wire.read_body(16 * 1024 * 1024)
        status, headers, data = await self._upstream(call.head, body)
        await self._send_upstream(call, status, headers, data)

    # -- the real server ---------------------------------------------------------------------

    def _authorization(self, given: str | None) -> str | None:
        """The bridge's credentials as the server must get them: the relay's current token
        (rotated or not) becomes the server's own; anything else goes up as it came."""
        if given is not None and self.token is not None and self.server_token is not None \
                and given.strip() == f"Bearer {self.token}":
            return f"Bearer {self.server_token}"
        return given

    async def _upstream(self, head: RequestHead, body: bytes) -> tuple[int, Headers, bytes]:
        headers = [(k, v) for k, v in relayed(head.headers)
                   if k.lower() != "authorization"
                   and not (self.stateful and k.lower() == SESSION_HEADER.lower())]
        authorization = self._authorization(head.authorization)
        if authorization is not None:
            headers.append(("Authorization", authorization))
        headers.append(("Accept-Encoding", "identity"))
        try:
            response = await self.client.request(head.method, self.upstream + head.target,
                                                 headers=headers, content=body or None)
        except httpx.HTTPError as exc:
            log(f"fault relay: the real server did not answer ({type(exc).__name__}: {exc})")
            return 502, [("Content-Type", "text/plain; charset=utf-8")], \
                b"palace-conformance fault relay: the real server did not answer\n"
        pairs = [(str(k), str(v)) for k, v in response.headers.multi_items()]
        return response.status_code, pairs, response.content

    async def _send_upstream(self, call: Call, status: int, headers: Headers,
                             data: bytes) -> None:
        for message in answer_messages(headers, data):
            if isinstance(message, dict):
                self.brain.journal.record("send", message=message,
                                          method=message.get("method"), id=message.get("id"))
        kept = [(k, v) for k, v in relayed(headers) if k.lower() not in RESTAMPED]
        await call.wire.send(status, [*kept, *call.extra], data)

    def take_prefetched(self, _text: str, exchange: Exchange) -> dict[str, Any] | None:
        """The brain's ``forward``: the real reply fetched before ``play()`` began."""
        return self.prefetched.pop(exchange, None)

    # -- answers -----------------------------------------------------------------------------

    async def answer(self, call: Call, exchange: Exchange) -> None:
        source = self.relay_brain.sources.get(exchange, b"")
        body = source.encode("utf-8", "surrogateescape") if isinstance(source, str) else source
        assert call.head is not None
        if exchange.kind != "response" and not exchange.faults:
            status, headers, data = await self._upstream(call.head, body)
            await self._send_upstream(call, status, headers, data)
            return
        if exchange.kind != "response" and _reset_at_once(exchange):
            # not one byte of the real answer reaches the bridge, so the reset must not wait
            # for it (a slow real search would turn it into the bridge's timeout): the server
            # still gets the request, as the fake still runs it, and the connection dies now
            task = asyncio.ensure_future(self._upstream(call.head, body))
            self.unanswered.add(task)
            task.add_done_callback(self.unanswered.discard)
            call.wire.budget = 0
            raise ConnectionGone("reset before the first byte of the answer")
        if exchange.kind != "response" and not swallowed(exchange) \
                and exchange.fault("lock_held") is None:
            _, headers, data = await self._upstream(call.head, body)
            replies = [m for m in answer_messages(headers, data)
                       if isinstance(m, dict) and "method" not in m]
            self.prefetched[exchange] = replies[0] if replies else None
        await super().answer(call, exchange)

    def exit_process(self, code: int) -> None:
        """The ``exit`` fault: the relay and the real server die at once, like a crash."""
        with contextlib.suppress(OSError):
            self.server.kill()
        os._exit(code)

    async def close(self) -> None:
        await super().close()
        with contextlib.suppress(Exception):
            await self.client.aclose()


def _reset_at_once(exchange: Exchange) -> bool:
    """A ``reset`` fault with no byte of the answer let through, and no other fault."""
    reset = exchange.fault("reset")
    return (reset is not None and len(exchange.faults) == 1
            and int(reset.params.get("after_bytes", 0) or 0) == 0)


def _stop_server(server: subprocess.Popen[bytes] | ZygoteProcess) -> int:
    if server.poll() is None:
        with contextlib.suppress(OSError):
            server.terminate()
        try:
            return server.wait(STOP_S)
        except subprocess.TimeoutExpired:
            server.kill()
            return server.wait(STOP_S)
    return server.wait(0)


async def _serve(config: dict[str, Any]) -> int:
    journal = Journal(config["journal"], "http")
    brain = RelayBrain(transport="http", plan=load_plan(config["plan"]), journal=journal,
                       palace=str(config["palace"]), forward=lambda _t, _e: None)
    start = startup_faults(brain.start_process(list(sys.argv)))
    if start.fail_code is not None:
        await pause(start.fail_after_ms)
        if start.fail_stderr:
            log(start.fail_stderr)
        return start.record_failure(brain)
    for size, invalid_utf8 in start.flood_bytes:
        flood_stderr(size, invalid_utf8)
    for pieces, pause_ms in start.stderr_pieces:
        write_stderr(pieces, pause_ms)
    await pause(start.delay_ms)
    port = int(config["port"])
    env = {str(k): str(v) for k, v in config["env"].items()}
    server: subprocess.Popen[bytes] | ZygoteProcess | None = zygote.spawn(
        config, env, stdin=False, stdout=False)  # the pre-started real server, if any
    if server is None:
        server = subprocess.Popen([str(a) for a in config["command"]], env=env,
                                  stdin=subprocess.DEVNULL, preexec_fn=die_with_parent,
                                  start_new_session=True)
    healthy = await asyncio.to_thread(wait_healthy, port, READY_S, lambda: server.poll() is None)
    if not healthy:
        log(f"fault relay: the real HTTP server did not come up (exit {server.poll()})")
        code = _stop_server(server)
        journal.record("process_exit", code=code, reason="real server did not start")
        return code or 1
    relay = FaultRelayServer(brain, f"http://127.0.0.1:{port}", token=config.get("token"),
                             sessions=bool(config.get("sessions")), server=server)
    await relay.start(0)
    stopped = asyncio.Event()
    reason: list[str] = []
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if start.ignore_sigterm and signum == signal.SIGTERM:
            journal.record("signal", signal=name, action="ignored")
            return
        journal.record("signal", signal=name, action="exit")
        reason.append(name)
        stopped.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, on_signal, signum)

    async def server_gone() -> None:
        while server.poll() is None:
            await asyncio.sleep(0.2)
        reason.append("real server exited")
        stopped.set()

    watcher = loop.create_task(server_gone())
    owner = _watch_owner(reason, stopped)
    _write_ready_file(str(config["ready"]), relay.url, relay.port)
    await stopped.wait()
    for task in (watcher, owner):
        if task is not None:
            task.cancel()
    await relay.close()
    code = _stop_server(server)
    journal.record("process_exit", code=0, reason=reason[0] if reason else "stopped",
                   server_code=code)
    return 0


def main(config_path: str) -> None:
    """The launcher's entry: read the configuration, serve until stopped, exit."""
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    code = asyncio.run(_serve(config))
    os._exit(code)
