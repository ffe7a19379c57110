"""The fake's brain with its palace swapped for the real server: the fault relays' one decider.

A fault relay (``relay/fault_stdio.py``, ``relay/fault_http.py``) stands where the fake would,
between the bridge and the real ``mempalace``. It hands every inbound message to
:meth:`RelayBrain.receive`, exactly as the fake does, so the same fault plan fires on the same
occurrences (counted through the same journal) and the same ``play()`` decides timing and
framing. Only the reply differs: where the fake's brain would answer from its in-memory palace,
this one asks the real server (``forward``), lazily, so a request a fault swallows (a stall, a
crash before the reply) never reaches the real palace, as it never reaches the fake's.

Three faults touch the answer itself and are applied on top of the real one: ``lock_held``
(the refusal the fake makes, instead of asking the server), ``negotiate_version`` (the version in
the real ``initialize`` result replaced) and the reply rewrites ``play()`` already does
(``error``, ``result``, ``wrong_id``, ``oversized``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from palace_conformance.fake.brain import PEER_WRITER_MESSAGE, Brain, Exchange, rpc_error
from palace_conformance.fake.faults import FaultPlan
from palace_conformance.fake.journal import Journal
from palace_conformance.fake.lease import Contention, Lease
from palace_conformance.fake.palace import PalaceStore

#: asks the real server: (the message as the bridge sent it, the exchange) -> its reply, or None
Forward = Callable[[str, Exchange], "dict[str, Any] | None"]

#: faults after which the fake never computes a reply: nothing is forwarded for them
#: (``exit`` only when it fires before the reply)
SWALLOWING = frozenset({"stall", "rotate_token", "forget_session", "http_status", "accept_202"})


def swallowed(exchange: Exchange) -> bool:
    """Whether a fault of this exchange ends it before the palace is asked (as the fake's
    ``play()`` and HTTP ``answer()`` do), so the real server must not see the request."""
    if any(f.action in SWALLOWING for f in exchange.faults):
        return True
    crash = exchange.fault("exit")
    return crash is not None and crash.params.get("when", "before_reply") == "before_reply"


class RelayBrain(Brain):
    """:class:`Brain` whose replies come from ``forward`` (the real server)."""

    def __init__(self, *, transport: str, plan: FaultPlan, journal: Journal, palace: str,
                 forward: Forward, catalogue: str = "full") -> None:
        # the lease is never taken here (the real server takes its own); it names the palace
        # in a simulated lock_held refusal, as the fake's does
        super().__init__(transport=transport, plan=plan, journal=journal, store=PalaceStore(),
                         lease=Lease(palace), catalogue=catalogue)
        self.forward = forward
        #: each exchange's message as the bridge sent it (a relay passes on the bytes it got)
        self.sources: weakref.WeakKeyDictionary[Exchange, bytes | str] = (
            weakref.WeakKeyDictionary())

    def receive(self, raw: bytes | str, meta: dict[str, Any] | None = None) -> Exchange:
        exchange = super().receive(raw, meta)
        if exchange.kind == "response":  # the bridge answering a request a fault sent
            return exchange
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        self.sources[exchange] = raw
        exchange.log = None  # the real server writes its own log lines
        exchange.hold_seconds = 0.0  # the real event_wait has already waited when it answers
        exchange.compute = lambda: self.relayed(text, exchange)
        return exchange

    def relayed(self, text: str, exchange: Exchange) -> dict[str, Any] | None:
        """The real server's reply to ``text``, as this exchange's faults change it."""
        refusal = self._simulated_lock(exchange)
        if refusal is not None:
            return refusal
        reply = self.forward(text, exchange)
        settle = exchange.fault("negotiate_version")
        if (settle is not None and reply is not None and exchange.method == "initialize"
                and isinstance(reply.get("result"), dict)):
            reply = {**reply, "result": {**reply["result"],
                                         "protocolVersion": str(settle.params["version"])}}
        return reply

    def _simulated_lock(self, exchange: Exchange) -> dict[str, Any] | None:
        """``lock_held``: a lease-taking tool refused as the fake refuses it (the refusal
        mempalace 3.11 gives a second writer), without asking the server."""
        simulated = exchange.fault("lock_held")
        message = exchange.message or {}
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if simulated is None or exchange.method != "tools/call" or name not in self.lease_taking:
            return None
        pid = simulated.params.get("pid", 4242)
        argv = simulated.params.get("argv", "mempalace-mcp")
        contention = Contention(self.lease.palace, f"{pid} ({argv})")
        return rpc_error(message.get("id"), -32001, PEER_WRITER_MESSAGE, {
            "tool": name, "palace": contention.palace, "reason": contention.reason,
            "failure_kind": contention.kind})
