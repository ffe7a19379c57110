"""The mutant catalogue: the reference bridge with exactly one rule broken, to prove the suite.

A mutant is never an edit to ``palace_bridge``'s files. It is a named set of in-process patches
that the reference host applies at start-up (``python -m palace_conformance.hosts.reference
--mutant NAME``), before the bridge is activated, so the mutant runs the real bridge with one rule
broken, through the real driver protocol, against the real fake. ``palace-conformance selftest``
(:mod:`.selftest`) then runs the scenarios covering the broken behaviour and expects a failure.

A patch names its target as ``module:Qualified.name`` and is built from the original attribute
(``make(original) -> replacement``), so it wraps or replaces exactly one function, method or
constant. :func:`resolve` insists that the target is defined right there (not inherited, not
missing), which is what the catalogue tests check: a refactor that renames a target breaks a
test instead of silently neutering the mutant.

To add a mutant: write a ``_make`` function below that returns the replacement (same signature
as the original), and add a :class:`Mutant` to :data:`MUTANTS` naming the behaviour IDs it
breaks. Kept import-light: ``palace_bridge`` is imported only when a patch is resolved.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Make = Callable[[Any], Any]


class MutantError(Exception):
    """An unknown mutant or a patch target that does not exist (any more); one line."""


@dataclass(frozen=True)
class Patch:
    """Replace ``target`` (``module:Qualified.name``) with ``make(original)``."""

    target: str
    make: Make

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.target.partition(":")[2].split("."))


@dataclass(frozen=True)
class Mutant:
    """The reference bridge with one rule broken.

    ``breaks``: the behaviour IDs whose scenarios must kill it (its selection is every scenario
    covering one of them, plus ``also``). ``control`` marks a deliberately harmless patch used to
    show that the selftest itself can fail; controls never run by default.
    """

    name: str
    breaks: tuple[str, ...]
    description: str
    patches: tuple[Patch, ...]
    also: tuple[str, ...] = ()
    control: bool = False


def resolve(patch: Patch) -> tuple[Any, str, Any]:
    """``(owner, attribute, original)``; :class:`MutantError` when the target is not there.

    The attribute must be defined on its owner itself (``vars(owner)``): a method inherited or
    moved elsewhere would be patched in the wrong place and the mutant would break nothing.
    """
    if ":" not in patch.target or not all(patch.path):
        raise MutantError(f"patch target {patch.target!r} is not 'module:Qualified.name'")
    try:
        owner: Any = importlib.import_module(patch.module)
    except ImportError as exc:
        raise MutantError(f"patch target {patch.target}: cannot import {patch.module} "
                          f"({exc})") from None
    *parents, name = patch.path
    for part in parents:
        owner = vars(owner).get(part) if hasattr(owner, "__dict__") else None
        if owner is None:
            raise MutantError(f"patch target {patch.target}: {part} not found in {patch.module}")
    if name not in vars(owner):
        raise MutantError(f"patch target {patch.target}: {name} is not defined there (renamed "
                          "or moved? update the mutant)")
    return owner, name, vars(owner)[name]


def apply(mutant: Mutant) -> None:
    """Patch the running process; every target is resolved before anything is changed."""
    planned = [(resolve(p), p) for p in mutant.patches]
    for (owner, name, original), patch in planned:
        setattr(owner, name, patch.make(original))


# --- helpers for the patches -------------------------------------------------------------------


def _state(name: str) -> Any:
    from palace_bridge.respawn import ChildState

    return ChildState[name]


class _NeverRaised(Exception):
    """Put in place of an exception class an ``except`` clause names: it then catches nothing."""


def _never_caught(original: Any) -> Any:
    return _NeverRaised


def _config_override(**changes: Any) -> Make:
    """``BridgeConfig.from_env`` (a classmethod) with some fields forced after reading."""

    def make(original: Any) -> Any:
        read = original.__func__

        def from_env(cls: Any, env: Mapping[str, str]) -> Any:
            return dataclasses.replace(read(cls, env), **changes)

        return classmethod(from_env)

    return make


def _feed_settings_override(**changes: Any) -> Make:
    """``FeedSettings.from_config`` (a classmethod) with some fields forced."""

    def make(original: Any) -> Any:
        read = original.__func__

        def from_config(cls: Any, config: Any) -> Any:
            return dataclasses.replace(read(cls, config), **changes)

        return classmethod(from_config)

    return make


# --- STDIO --------------------------------------------------------------------------------------


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
        if self.state is _state("DEAD") and 0 < self.max_respawns <= self.used:
            self.used = self.max_respawns - 1  # never spent: respawn again at the last backoff
        return original(self)

    return want_child


def _backoff_flat(original: Any) -> Any:
    def exponential_delay_ms(base_ms: int, attempt: int, cap_ms: int | None = None) -> int:
        return base_ms if cap_ms is None else min(base_ms, cap_ms)

    return exponential_delay_ms


def _ready_without_reset(original: Any) -> Any:
    def on_ready(self: Any) -> None:
        if self.state is _state("STARTING"):
            self.state = _state("READY")

    return on_ready


def _success_ignored(original: Any) -> Any:
    def on_success(self: Any) -> None:
        return None

    return on_success


def _zero_respawns_means_one(original: Any) -> Any:
    def __init__(self: Any, max_respawns: int, backoff_ms: int) -> None:
        original(self, max_respawns or 1, backoff_ms)

    return __init__


def _first_start_final(original: Any) -> Any:
    def on_start_failed(self: Any, why: str) -> None:
        first = self.state is _state("STARTING") and self.used == 0
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


def _stderr_never_read(original: Any) -> Any:
    async def _drain_stderr(self: Any) -> None:
        return None

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


def _zero_is_a_deadline(original: Any) -> Any:
    return property(lambda self: True)


def _death_is_final(original: Any) -> Any:
    def on_death(self: Any, why: str) -> None:
        original(self, why)
        self.on_unspawnable(f"mempalace-mcp died ({why})")

    return on_death


def _stop_signals_first(original: Any) -> Any:
    async def _close(self: Any, grace_ms: int) -> None:
        await self._terminate(grace_ms, "stopped")  # SIGTERM straight away, stdin never closed

    return _close


# --- HTTP ---------------------------------------------------------------------------------------


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


def _cancel_never_sent(original: Any) -> Any:
    def _cancel_soon(self: Any, request_id: int, headers: dict[str, str]) -> None:
        return None

    return _cancel_soon


def _headers_logged(original: Any) -> Any:
    def _headers(self: Any, extra: dict[str, str], *, body: bool = True) -> dict[str, str]:
        headers = original(self, extra, body=body)
        if self.log.debug_enabled:  # a debug line that forgets the redaction
            self.log._write(f"mempalace[debug]: request headers {headers}\n")
        return headers

    return _headers


def _connect_not_retried(original: Any) -> Any:
    class ConnectRetries(original):  # type: ignore[misc, valid-type]
        def __init__(self, retries: int, backoff_ms: int) -> None:
            super().__init__(0, backoff_ms)

    return ConnectRetries


def _no_keepalive(original: Any) -> Any:
    async def _keep_alive(self: Any) -> None:
        return None

    return _keep_alive


def _no_delete(original: Any) -> Any:
    async def delete(self: Any, headers: dict[str, str]) -> int | None:
        return None

    return delete


# --- LIFE ---------------------------------------------------------------------------------------


class _FallbackEngine:
    """A remote engine that falls back to a local child when the remote palace is down."""

    remote = True

    def __init__(self, primary: Any, local: Any) -> None:
        self.primary = primary
        self.local = local
        self.active = primary

    @property
    def tools(self) -> Any:
        return self.active.tools

    @property
    def available(self) -> bool:
        return bool(self.active.available)

    @property
    def child_pids(self) -> list[int]:
        return list(self.local.child_pids)

    @property
    def spawned_pids(self) -> list[int]:
        return list(self.local.spawned_pids)

    async def start(self) -> bool:
        if await self.primary.start():
            return True
        self.active = self.local
        return bool(await self.local.start())

    async def request(self, method: str, params: Any, timeout_ms: int | None = None) -> Any:
        return await self.active.request(method, params, timeout_ms)

    async def stop(self) -> None:
        await self.primary.stop()
        await self.local.stop()


def _local_fallback(original: Any) -> Any:
    def create_client(env: Mapping[str, str], *, stderr: Any = None) -> Any:
        client = original(env, stderr=stderr)
        if client.engine.remote:
            from palace_bridge.local import LocalEngine

            local = LocalEngine(client.config, dict(env), client.log)
            client.engine = _FallbackEngine(client.engine, local)
        return client

    return create_client


def _timeout_reread(original: Any) -> Any:
    def for_request(self: Any, clock: Any, override_ms: int | None = None) -> Any:
        raw = os.environ.get("MEMPALACE_MCP_TIMEOUT_MS", "").strip()
        if override_ms is None and raw.isdigit():
            override_ms = int(raw)  # the knob read again, after load
        return original(self, clock, override_ms)

    return for_request


def _first_page_only(original: Any) -> Any:
    async def list_tools(send: Any, deadline: Any, log: Any) -> Any:
        async def one_page(method: str, params: Any, budget: Any) -> Any:
            response = await send(method, params, budget)
            if isinstance(response.result, dict):
                response.result.pop("nextCursor", None)
            return response

        return await original(one_page, deadline, log)

    return list_tools


# --- TOOL ---------------------------------------------------------------------------------------

LOOSENED_KEYWORDS = frozenset({"maximum", "minimum", "maxLength", "minLength", "maxItems"})


def _loosen(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _loosen(v) for k, v in schema.items()
                if not (k in LOOSENED_KEYWORDS and isinstance(v, int | float))}
    if isinstance(schema, list):
        return [_loosen(v) for v in schema]
    return schema


def _schemas_loosened(original: Any) -> Any:
    read = original.__func__

    def from_wire(cls: Any, data: dict[str, Any]) -> Any:
        spec = read(cls, data)
        return dataclasses.replace(spec, input_schema=_loosen(spec.input_schema))

    return classmethod(from_wire)


def _is_error_raised(original: Any) -> Any:
    from palace_bridge.errors import PalaceToolError

    async def call_tool(self: Any, name: str, arguments: dict[str, Any] | None = None, *,
                        timeout_ms: int | None = None) -> Any:
        result = await original(self, name, arguments, timeout_ms=timeout_ms)
        if result.is_error:
            raise PalaceToolError(-32000, result.text or "tool error", None, "tools/call")
        return result

    return call_tool


def _nulls_dropped(original: Any) -> Any:
    async def call_tool(self: Any, name: str, arguments: dict[str, Any] | None = None, *,
                        timeout_ms: int | None = None) -> Any:
        if isinstance(arguments, dict):
            arguments = {k: v for k, v in arguments.items() if v is not None}
        return await original(self, name, arguments, timeout_ms=timeout_ms)

    return call_tool


def _error_data_dropped(original: Any) -> Any:
    class PalaceToolError(original):  # type: ignore[misc, valid-type]
        def __init__(self, code: int, message: str, data: Any = None, method: str = "") -> None:
            super().__init__(code, message, None, method)

    return PalaceToolError


# --- WAKE, FEED, PROV, MAIL, DIARY, KNOB -------------------------------------------------------


def _wakeup_rearmed(original: Any) -> Any:
    async def before_agent_start(self: Any) -> Any:
        armed = self.armed
        try:
            return await original(self)
        finally:
            self.armed = armed

    return before_agent_start


def _every_reason_fresh(original: Any) -> Any:
    return frozenset(original) | {"resume", "fork", "reload"}


def _feed_never_running(original: Any) -> Any:
    def _running(self: Any) -> Any:
        return None

    return _running


def _window_forgotten(original: Any) -> Any:
    def settled(self: Any) -> Any:
        self.last_fed = None
        return original(self)

    return settled


def _refusal_counts_as_fed(original: Any) -> Any:
    def succeeded(self: Any) -> bool:
        return self.name in ("MINED", "NOTHING", "MINE_REFUSED")

    return property(succeeded)


def _remote_skip_silent(original: Any) -> Any:
    def _may_feed(self: Any) -> bool:
        self._skip_reported = True
        return bool(original(self))

    return _may_feed


def _feed_mine_unstamped(original: Any) -> Any:
    async def _mine(self: Any, source: str) -> Any:
        saved = self.stamper
        self.stamper = dataclasses.replace(saved, device=None)
        try:
            return await original(self, source)
        finally:
            self.stamper = saved

    return _mine


def _stamper_without_remote_gate(original: Any) -> Any:
    def stamper_for(device: str | None, shared_palace: bool, harness: str = "pi") -> Any:
        return original(device, bool(device), harness)

    return stamper_for


def _always_unset(original: Any) -> Any:
    def _unset(value: Any) -> bool:
        return True

    return _unset


def _diary_tool_renamed(original: Any) -> Any:
    return f"{original}_unstamped"


def _broadcast_owed(original: Any) -> Any:
    def owed(me: str, inbox: Any, mine: Any) -> Any:
        inbox = [dict(e, to_agent=me) if isinstance(e, dict) and e.get("to_agent") == "*" else e
                 for e in inbox]
        return original(me, inbox, mine)

    return owed


def _seq_ignored(original: Any) -> Any:
    def _answers(reply: dict[str, Any], ask: dict[str, Any]) -> bool:
        seq = ask.get("seq")
        if isinstance(seq, int) and isinstance(reply.get("seq"), int):
            reply = dict(reply, seq=seq + 1)  # any reply counts as later
        return bool(original(reply, ask))

    return _answers


def _ack_of_ignored(original: Any) -> Any:
    def _answers(reply: dict[str, Any], ask: dict[str, Any]) -> bool:
        return bool(original(dict(reply, metadata={}), ask))  # only correlation_id joins

    return _answers


def _ack_of_any_event(original: Any) -> Any:
    def _answers(reply: dict[str, Any], ask: dict[str, Any]) -> bool:
        metadata = reply.get("metadata")
        if isinstance(metadata, dict) and metadata.get("ack_of"):  # acks *something*: enough
            reply = dict(reply, metadata=dict(metadata, ack_of=ask.get("id")))
        return bool(original(reply, ask))

    return _answers


def _claimed_is_terminal(original: Any) -> Any:
    return frozenset(original) | {"claimed"}


def _poll_every_settle(original: Any) -> Any:
    def due(self: Any) -> bool:
        return self.me is not None

    return due


def _topic_dropped(original: Any) -> Any:
    def diary_prompt(agent_name: str, topic: str | None) -> str:
        return str(original(agent_name, None))

    return diary_prompt


def _default_respawns_three(original: Any) -> Any:
    read = original.__func__

    def from_env(cls: Any, env: Mapping[str, str]) -> Any:
        config = read(cls, env)
        if not (env.get("MEMPALACE_MCP_MAX_RESPAWNS") or "").strip():
            config = dataclasses.replace(config, max_respawns=3)
        return config

    return classmethod(from_env)


# --- the catalogue ------------------------------------------------------------------------------

_LOCAL = "palace_bridge.local"
_STDIO = "palace_bridge.stdio"
_RESPAWN = "palace_bridge.respawn"
_REMOTE = "palace_bridge.remote"
_SESSION = "palace_bridge.session"
_FEEDING = "palace_bridge.features.feeding"
_MAILBOX = "palace_bridge.features.mailbox"
_CONFIG = "palace_bridge.config:BridgeConfig.from_env"


def _m(name: str, breaks: str, description: str, *patches: tuple[str, Make],
       also: tuple[str, ...] = ()) -> Mutant:
    return Mutant(name, tuple(breaks.split()), description,
                  tuple(Patch(target, make) for target, make in patches), also)


MUTANTS: tuple[Mutant, ...] = (
    # LIFE
    _m("life-remote-falls-back-to-local", "LIFE-02",
       "an unreachable remote palace makes the bridge start a local child instead",
       ("palace_bridge.client:create_client", _local_fallback)),
    _m("life-timeout-reread-after-load", "LIFE-03",
       "the request timeout is read from the live environment on every call",
       ("palace_bridge.deadlines:TimeoutPolicy.for_request", _timeout_reread)),
    _m("life-tools-list-first-page-only", "LIFE-04",
       "tools/list stops after the first page, ignoring nextCursor",
       (f"{_LOCAL}:list_tools", _first_page_only), (f"{_REMOTE}:list_tools", _first_page_only)),
    _m("life-stop-signals-instead-of-closing", "LIFE-06",
       "stop sends SIGTERM at once instead of closing stdin and waiting",
       (f"{_STDIO}:StdioConnection._close", _stop_signals_first)),
    _m("life-no-delete-at-shutdown", "LIFE-06",
       "shutdown never sends the DELETE for a held HTTP session",
       ("palace_bridge.http:HttpTransport.delete", _no_delete)),
    # TOOL
    _m("tool-schemas-loosened", "TOOL-01",
       "numeric bounds (maximum, minLength, ...) are stripped from registered schemas",
       ("palace_bridge.tools:ToolSpec.from_wire", _schemas_loosened)),
    _m("tool-null-arguments-dropped", "TOOL-02",
       "top-level null arguments are removed before tools/call",
       ("palace_bridge.client:PalaceClient.call_tool", _nulls_dropped)),
    _m("tool-is-error-raised", "TOOL-03",
       "an isError result is turned into an exception",
       ("palace_bridge.client:PalaceClient.call_tool", _is_error_raised)),
    _m("tool-error-data-dropped", "TOOL-04",
       "a JSON-RPC error reaches the agent without its data",
       ("palace_bridge.client:PalaceToolError", _error_data_dropped)),
    # STDIO
    _m("stdio-timeout-twenty-times-late", "STDIO-01",
       "a tool call's timeout is applied at twenty times MEMPALACE_MCP_TIMEOUT_MS",
       (f"{_LOCAL}:LocalEngine.request", _timeout_twenty_times_late)),
    _m("stdio-timed-out-child-not-killed", "STDIO-02",
       "a child whose call timed out is forgotten, not killed",
       (f"{_LOCAL}:LocalEngine._retire", _retire_without_kill)),
    _m("stdio-no-sigkill-escalation", "STDIO-02",
       "a child deaf to SIGTERM is never SIGKILLed",
       (f"{_STDIO}:StdioConnection._signal_group", _no_sigkill)),
    _m("stdio-handshake-on-request-budget", "STDIO-03",
       "initialize + tools/list get the request timeout, not the init budget",
       ("palace_bridge.deadlines:TimeoutPolicy.for_handshake", _handshake_uses_request_budget)),
    _m("stdio-zero-timeout-not-disabled", "STDIO-04",
       "a timeout of 0 is an immediate deadline instead of none",
       ("palace_bridge.deadlines:Deadline.enabled", _zero_is_a_deadline)),
    _m("stdio-no-self-heal", "STDIO-05",
       "the first death of a running child is final",
       (f"{_RESPAWN}:RespawnPolicy.on_death", _death_is_final)),
    _m("stdio-respawn-unbounded", "STDIO-06",
       "the respawn budget is never spent",
       (f"{_RESPAWN}:RespawnPolicy.want_child", _respawn_unbounded)),
    _m("stdio-backoff-not-doubled", "STDIO-06",
       "every respawn waits the base backoff instead of doubling it",
       (f"{_RESPAWN}:exponential_delay_ms", _backoff_flat)),
    _m("stdio-budget-never-resets", "STDIO-07",
       "neither a handshake nor a successful answer restores the respawn budget",
       (f"{_RESPAWN}:RespawnPolicy.on_ready", _ready_without_reset),
       (f"{_RESPAWN}:RespawnPolicy.on_success", _success_ignored)),
    _m("stdio-zero-respawns-not-latched", "STDIO-08",
       "MEMPALACE_MCP_MAX_RESPAWNS=0 is treated as 1",
       (f"{_RESPAWN}:RespawnPolicy.__init__", _zero_respawns_means_one)),
    _m("stdio-first-start-intolerant", "STDIO-09",
       "a failed first start is final: no bounded respawn",
       (f"{_RESPAWN}:RespawnPolicy.on_start_failed", _first_start_final)),
    _m("stdio-stderr-never-drained", "STDIO-11",
       "the child's stderr pipe is never read",
       (f"{_STDIO}:StdioConnection._drain_stderr", _stderr_never_read)),
    _m("stdio-stderr-always-forwarded", "STDIO-11",
       "the child's stderr reaches the host without MEMPALACE_EXT_DEBUG=1",
       ("palace_bridge.log:Log.raw", _raw_always_written)),
    _m("stdio-inflight-waits-for-timeout", "STDIO-12",
       "calls in flight when the child dies wait for their timeout",
       (f"{_STDIO}:StdioConnection._close_session", _close_session_keeps_waiters)),
    _m("stdio-junk-line-ends-session", "STDIO-13",
       "a malformed stdout line ends the session instead of being dropped",
       (f"{_STDIO}:StdioConnection._dispatch", _junk_closes_session)),
    # HTTP
    _m("http-token-in-debug-log", "HTTP-01",
       "debug mode logs each request's headers, bearer token included",
       ("palace_bridge.http:HttpTransport._headers", _headers_logged)),
    _m("http-connect-not-retried", "HTTP-02",
       "a failed connect is given up at once, without retries",
       (f"{_REMOTE}:ConnectRetries", _connect_not_retried)),
    _m("http-session-id-not-sent", "HTTP-03",
       "the issued Mcp-Session-Id is never sent back",
       (f"{_SESSION}:HttpSession.headers", _session_id_dropped)),
    _m("http-404-retried-twice", "HTTP-04",
       "a 404 on the retried call renews the session and retries again",
       (f"{_SESSION}:HttpSession.judge", _404_retried_twice)),
    _m("http-404-never-retried", "HTTP-04",
       "a 404 on a session request fails the call without renewing and retrying",
       (f"{_SESSION}:HttpSession.judge", _404_never_retried)),
    _m("http-preamble-skipped-on-renewal", "HTTP-05",
       "a replacement session after a 404 starts without the session preamble",
       (f"{_REMOTE}:RemoteEngine._renew", _renew_without_preamble)),
    _m("http-no-keepalive", "HTTP-06",
       "the keep-alive ping never runs",
       (f"{_REMOTE}:RemoteEngine._keep_alive", _no_keepalive)),
    _m("http-get-stream-opened", "HTTP-07",
       "an idle GET stream is opened after every initialize",
       (f"{_REMOTE}:RemoteEngine._open_session", _get_stream_opened)),
    _m("http-401-reinitializes", "HTTP-08",
       "a 401 starts a new session and retries",
       (f"{_SESSION}:HttpSession.judge", _401_renews)),
    _m("http-5xx-replayed", "HTTP-09",
       "a call that got a 5xx is sent again",
       (f"{_SESSION}:HttpSession.judge", _5xx_replayed)),
    _m("http-cancel-sent-for-initialize", "HTTP-11",
       "a timed-out initialize gets a notifications/cancelled",
       (f"{_REMOTE}:RemoteEngine._post", _cancel_even_initialize)),
    _m("http-no-cancel-on-timeout", "HTTP-11",
       "a timed-out call gets no notifications/cancelled",
       (f"{_REMOTE}:RemoteEngine._cancel_soon", _cancel_never_sent)),
    # WAKE
    _m("wake-every-turn", "WAKE-02",
       "the wake-up is injected on every prompt of a fresh session",
       ("palace_bridge.features.wakeup:WakeUp.before_agent_start", _wakeup_rearmed)),
    _m("wake-on-resume", "WAKE-03",
       "resumed, forked and reloaded sessions get a wake-up too",
       ("palace_bridge.features.wakeup:FRESH_REASONS", _every_reason_fresh)),
    _m("wake-failure-escapes", "WAKE-04",
       "a failing wake-up call raises into the host",
       ("palace_bridge.features.wakeup:PalaceError", _never_caught)),
    # FEED
    _m("feed-debounce-ignored", "FEED-02",
       "every agent_settled feeds, whatever the debounce window",
       (f"{_FEEDING}:Feeder.settled", _window_forgotten)),
    _m("feed-flag-ignored", "FEED-03",
       "MEMPALACE_FEED=0 does not disable feeding",
       (_CONFIG, _config_override(feed=True))),
    _m("feed-wing-knob-ignored", "FEED-04",
       "the feed always uses wing_conversations",
       (f"{_FEEDING}:FeedSettings.from_config",
        _feed_settings_override(wing="wing_conversations"))),
    _m("feed-prepare-never-times-out", "FEED-05",
       "the prepare helper runs without its timeout",
       (f"{_FEEDING}:FeedSettings.from_config",
        _feed_settings_override(prepare_timeout_ms=0))),
    _m("feed-mine-never-times-out", "FEED-06",
       "the feed's mine call runs without its timeout",
       (f"{_FEEDING}:FeedSettings.from_config", _feed_settings_override(mine_timeout_ms=0))),
    _m("feed-triggers-not-coalesced", "FEED-08",
       "a trigger during a feed starts a second feed instead of joining it",
       (f"{_FEEDING}:Feeder._running", _feed_never_running)),
    _m("feed-remote-skip-silent", "FEED-09",
       "skipping the feed on a remote palace is never reported",
       (f"{_FEEDING}:Feeder._may_feed", _remote_skip_silent)),
    _m("feed-refusal-charges-window", "FEED-10",
       "a mine refused by the writer lock closes the debounce window like a success",
       (f"{_FEEDING}:Outcome.succeeded", _refusal_counts_as_fed)),
    # PROV
    _m("prov-diary-unstamped", "PROV-01",
       "diary entries on a shared palace get no HOST:<device>| prefix",
       ("palace_bridge.features.provenance:DIARY_TOOL", _diary_tool_renamed)),
    _m("prov-explicit-writer-overwritten", "PROV-02",
       "a writer the caller set is replaced by the device stamp",
       ("palace_bridge.features.provenance:_unset", _always_unset)),
    _m("prov-stamped-without-remote", "PROV-03",
       "provenance is stamped with a device name alone, without a remote palace",
       ("palace_bridge.extension:stamper_for", _stamper_without_remote_gate)),
    _m("prov-feed-mine-unstamped", "PROV-04",
       "the feed's own mempalace_mine goes out unstamped",
       (f"{_FEEDING}:Feeder._mine", _feed_mine_unstamped)),
    # MAIL
    _m("mail-flag-ignored", "MAIL-01",
       "MEMPALACE_MAILBOX=0 does not disable the mailbox",
       (_CONFIG, _config_override(mailbox=True))),
    _m("mail-seq-ignored", "MAIL-03",
       "a reply closes an ask whatever their seq order",
       (f"{_MAILBOX}:_answers", _seq_ignored)),
    _m("mail-ack-of-ignored", "MAIL-03",
       "metadata.ack_of does not join a reply to its ask (only correlation_id does)",
       (f"{_MAILBOX}:_answers", _ack_of_ignored)),
    _m("mail-ack-of-any-event", "MAIL-03",
       "a reply that acks any event closes every ask",
       (f"{_MAILBOX}:_answers", _ack_of_any_event)),
    _m("mail-claimed-closes", "MAIL-03",
       "a 'claimed' reply counts as terminal",
       (f"{_MAILBOX}:TERMINAL", _claimed_is_terminal)),
    _m("mail-broadcasts-owed", "MAIL-04",
       "broadcasts (to_agent '*') are counted as owed",
       (f"{_MAILBOX}:owed", _broadcast_owed)),
    _m("mail-poll-every-settle", "MAIL-05",
       "agent_settled polls the mailbox every time, ignoring the poll floor",
       (f"{_MAILBOX}:Mailbox.due", _poll_every_settle)),
    _m("mail-failure-escapes", "MAIL-06",
       "a failing mailbox query raises instead of staying silent",
       (f"{_MAILBOX}:PalaceError", _never_caught)),
    # DIARY, KNOB
    _m("diary-topic-dropped", "DIARY-01",
       "/mempalace-diary ignores the topic",
       ("palace_bridge.features.diary:diary_prompt", _topic_dropped)),
    _m("knob-default-respawns-three", "KNOB-01",
       "the default MEMPALACE_MCP_MAX_RESPAWNS is 3 instead of 2",
       (_CONFIG, _default_respawns_three)),
    _m("knob-warnings-silenced", "KNOB-02",
       "a malformed knob falls back to its default without a warning",
       (_CONFIG, _config_override(warnings=()))),
)


def _passthrough(original: Any) -> Any:
    def on_success(self: Any) -> None:
        original(self)

    return on_success


#: deliberately harmless mutants: selecting one must make the selftest fail (it survives)
CONTROLS: tuple[Mutant, ...] = (
    Mutant("control-noop", ("STDIO-07",),
           "a real patch that changes nothing: it must survive",
           (Patch(f"{_RESPAWN}:RespawnPolicy.on_success", _passthrough),), control=True),
)


def find(name: str) -> Mutant:
    """The mutant (or control) called ``name``; :class:`MutantError` naming the choices."""
    for mutant in (*MUTANTS, *CONTROLS):
        if mutant.name == name:
            return mutant
    raise MutantError(f"no mutant named {name!r} (see palace-conformance selftest --list)")
