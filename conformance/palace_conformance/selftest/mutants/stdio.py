"""Mutants of STDIO: the local child (timeouts, kills, respawns, stderr, framing)."""

from __future__ import annotations

import signal
from typing import Any

from palace_conformance.selftest.mutants.model import Mutant
from palace_conformance.selftest.mutants.patching import (
    LOCAL,
    RESPAWN,
    STDIO,
    answers,
    answers_later,
    mutant,
    state,
)


def _retire_without_kill(original: Any) -> Any:
    def _retire(self: Any, conn: Any, why: str) -> None:
        if conn is self.conn:  # the policy hears of the death, but the child is left running
            self.policy.on_death(why)
            self.conn = None

    return _retire


def _no_sigkill(original: Any) -> Any:
    def _signal_group(self: Any, sig: signal.Signals) -> None:
        if sig != signal.SIGKILL:
            original(self, sig)

    return _signal_group


def _timeout_twenty_times_late(original: Any) -> Any:
    async def request(self: Any, method: str, params: Any, timeout_ms: int | None = None) -> Any:
        if timeout_ms is None and self.config.timeout_ms:
            timeout_ms = self.config.timeout_ms * 20
        return await original(self, method, params, timeout_ms)

    return request


def _respawn_unbounded(original: Any) -> Any:
    def want_child(self: Any) -> Any:
        if self.state is state("DEAD") and 0 < self.max_respawns <= self.used:
            self.used = self.max_respawns - 1  # never spent: respawn again at the last backoff
        return original(self)

    return want_child


def _backoff_flat(original: Any) -> Any:
    def exponential_delay_ms(base_ms: int, attempt: int, cap_ms: int | None = None) -> int:
        return base_ms if cap_ms is None else min(base_ms, cap_ms)

    return exponential_delay_ms


def _ready_without_reset(original: Any) -> Any:
    def on_ready(self: Any) -> None:
        if self.state is state("STARTING"):
            self.state = state("READY")

    return on_ready




def _success_while_starting_resets(original: Any) -> Any:
    def on_success(self: Any) -> None:
        self.used = 0  # even the initialize answer of a child still in its handshake

    return on_success


def _zero_respawns_means_one(original: Any) -> Any:
    def __init__(self: Any, max_respawns: int, backoff_ms: int) -> None:
        original(self, max_respawns or 1, backoff_ms)

    return __init__


def _first_start_final(original: Any) -> Any:
    def on_start_failed(self: Any, why: str) -> None:
        first = self.state is state("STARTING") and self.used == 0
        original(self, why)
        if first:
            self.on_unspawnable(why)

    return on_start_failed


def _close_session_keeps_waiters(original: Any) -> Any:
    def _close_session(self: Any, reason: str) -> None:
        if self._closed.is_set():
            return
        self.closed_reason = reason
        self._closed.set()  # in-flight requests are not failed: they wait for their deadline

    return _close_session




def _stderr_decoded_strictly(original: Any) -> Any:
    from palace_bridge.stdio import READ_CHUNK

    async def _drain_stderr(self: Any) -> None:
        try:
            while True:
                chunk = await self.proc.stderr.read(READ_CHUNK)
                if not chunk:
                    return
                self.log.raw(chunk.decode())  # strict: the first byte that is not UTF-8 ends it
        except (OSError, ValueError):
            return

    return _drain_stderr


def _raw_always_written(original: Any) -> Any:
    def raw(self: Any, text: str) -> None:
        if text:
            self._write(self.redact(text))

    return raw


def _junk_closes_session(original: Any) -> Any:
    from palace_bridge.jsonrpc import Invalid

    def _dispatch(self: Any, message: Any) -> None:
        if isinstance(message, Invalid):
            self._close_session(f"malformed line from mempalace-mcp ({message.reason})")
            return
        original(self, message)

    return _dispatch


def _handshake_uses_request_budget(original: Any) -> Any:
    from palace_bridge.deadlines import Deadline

    def for_handshake(self: Any, clock: Any) -> Any:
        return Deadline.start(clock, self.request_timeout_ms)

    return for_handshake


def _zero_init_takes_request_budget(original: Any) -> Any:
    from palace_bridge.deadlines import Deadline

    def for_handshake(self: Any, clock: Any) -> Any:  # `init || timeout`: 0 read as "unset"
        return Deadline.start(clock, self.init_timeout_ms or self.request_timeout_ms)

    return for_handshake


def _zero_request_takes_init_budget(original: Any) -> Any:
    from palace_bridge.deadlines import Deadline

    def for_request(self: Any, clock: Any, override_ms: int | None = None) -> Any:
        if override_ms is not None:
            return original(self, clock, override_ms)
        return Deadline.start(clock, self.request_timeout_ms or self.init_timeout_ms)

    return for_request


def _zero_is_a_deadline(original: Any) -> Any:
    return property(lambda self: True)


def _death_is_final(original: Any) -> Any:
    def on_death(self: Any, why: str) -> None:
        original(self, why)
        self.on_unspawnable(f"mempalace-mcp died ({why})")

    return on_death


#: patches made by the shared makers (patching.py)
_success_ignored = answers(None)
_stderr_never_read = answers_later(None)


MUTANTS: tuple[Mutant, ...] = (
    # STDIO
    mutant("stdio-timeout-twenty-times-late", "STDIO-01",
       "a tool call's timeout is applied at twenty times MEMPALACE_MCP_TIMEOUT_MS",
       (f"{LOCAL}:LocalEngine.request", _timeout_twenty_times_late)),
    mutant("stdio-timed-out-child-not-killed", "STDIO-02",
       "a child whose call timed out is forgotten, not killed",
       (f"{LOCAL}:LocalEngine._retire", _retire_without_kill)),
    mutant("stdio-no-sigkill-escalation", "STDIO-02",
       "a child deaf to SIGTERM is never SIGKILLed",
       (f"{STDIO}:StdioConnection._signal_group", _no_sigkill)),
    mutant("stdio-handshake-on-request-budget", "STDIO-03",
       "initialize + tools/list get the request timeout, not the init budget",
       ("palace_bridge.deadlines:TimeoutPolicy.for_handshake", _handshake_uses_request_budget)),
    mutant("stdio-zero-timeout-not-disabled", "STDIO-04",
       "a timeout of 0 is an immediate deadline instead of none",
       ("palace_bridge.deadlines:Deadline.enabled", _zero_is_a_deadline)),
    mutant("stdio-zero-init-timeout-falls-back", "STDIO-04",
       "MEMPALACE_MCP_INIT_TIMEOUT_MS=0 falls back to the request timeout instead of no deadline",
       ("palace_bridge.deadlines:TimeoutPolicy.for_handshake", _zero_init_takes_request_budget)),
    mutant("stdio-zero-request-timeout-falls-back", "STDIO-04",
       "MEMPALACE_MCP_TIMEOUT_MS=0 falls back to the init timeout instead of no deadline",
       ("palace_bridge.deadlines:TimeoutPolicy.for_request", _zero_request_takes_init_budget)),
    mutant("stdio-no-self-heal", "STDIO-05",
       "the first death of a running child is final",
       (f"{RESPAWN}:RespawnPolicy.on_death", _death_is_final)),
    mutant("stdio-respawn-unbounded", "STDIO-06",
       "the respawn budget is never spent",
       (f"{RESPAWN}:RespawnPolicy.want_child", _respawn_unbounded)),
    mutant("stdio-backoff-not-doubled", "STDIO-06",
       "every respawn waits the base backoff instead of doubling it",
       (f"{RESPAWN}:exponential_delay_ms", _backoff_flat)),
    mutant("stdio-budget-never-resets", "STDIO-07",
       "neither a handshake nor a successful answer restores the respawn budget",
       (f"{RESPAWN}:RespawnPolicy.on_ready", _ready_without_reset),
       (f"{RESPAWN}:RespawnPolicy.on_success", _success_ignored)),
    mutant("stdio-handshake-keeps-budget-spent", "STDIO-07",
       "a completed handshake does not restore the respawn budget; only a tool call's answer does",
       (f"{RESPAWN}:RespawnPolicy.on_ready", _ready_without_reset)),
    mutant("stdio-initialize-answer-resets-budget", "STDIO-07",
       "any answer resets the respawn budget, even initialize from a child that then dies",
       (f"{RESPAWN}:RespawnPolicy.on_success", _success_while_starting_resets)),
    mutant("stdio-zero-respawns-not-latched", "STDIO-08",
       "MEMPALACE_MCP_MAX_RESPAWNS=0 is treated as 1",
       (f"{RESPAWN}:RespawnPolicy.__init__", _zero_respawns_means_one)),
    mutant("stdio-first-start-intolerant", "STDIO-09",
       "a failed first start is final: no bounded respawn",
       (f"{RESPAWN}:RespawnPolicy.on_start_failed", _first_start_final)),
    mutant("stdio-stderr-never-drained", "STDIO-11",
       "the child's stderr pipe is never read",
       (f"{STDIO}:StdioConnection._drain_stderr", _stderr_never_read)),
    mutant("stdio-stderr-decoded-strictly", "STDIO-11",
       "the stderr drain decodes UTF-8 strictly and stops at the first byte that is not",
       (f"{STDIO}:StdioConnection._drain_stderr", _stderr_decoded_strictly)),
    mutant("stdio-stderr-always-forwarded", "STDIO-11",
       "the child's stderr reaches the host without MEMPALACE_EXT_DEBUG=1",
       ("palace_bridge.log:Log.raw", _raw_always_written)),
    mutant("stdio-inflight-waits-for-timeout", "STDIO-12",
       "calls in flight when the child dies wait for their timeout",
       (f"{STDIO}:StdioConnection._close_session", _close_session_keeps_waiters)),
    mutant("stdio-junk-line-ends-session", "STDIO-13",
       "a malformed stdout line ends the session instead of being dropped",
       (f"{STDIO}:StdioConnection._dispatch", _junk_closes_session)),
)
