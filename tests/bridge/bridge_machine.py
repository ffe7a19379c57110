"""A hypothesis state machine that drives the reference bridge through its host API (issue 13).

Rules play pi's part (tool calls, events, the diary command, /reload) and a hostile world (faults
armed in a real fake server, children killed or stopped). After every rule the invariants below
are checked; when an example ends, the bridge is shut down and every process it started must be
gone. Both transports run against real processes: the stdio fake as ``mempalace-mcp`` on PATH,
and a ``palace-conformance fake http`` process whose faults are armed at run time through its
control API.

Invariants (each one a seed rule; none is relaxed to make a run pass):

* deadline: every op ends within the worst case the knobs allow, plus a generous slack (an upper
  bound only: it tells "a deadline fired" from "it hung");
* no escape: a tool call ends in a result or a :class:`PalaceError` a host maps to a DRIVER.md
  kind (never ``exception``); no event handler raises (no ``error`` effect); no background task
  dies of an internal error;
* remote is remote: with ``MEMPALACE_REMOTE_URL`` no local child starts (LIFE-02), checked in a
  stdio journal armed on PATH, the client's own list and this process's children;
* no replay: a write call reaches the palace once, whatever failed (TOOL-*/STDIO-02/HTTP-09); over
  HTTP the one allowed repeat is the retry after a 404 on a held session (HTTP-04);
* respawn budget: from load, and from each post-handshake success, at most ``max_respawns``
  respawns; nothing is spawned after shutdown (STDIO-05..08);
* no orphan: after shutdown every process the fake journaled (children and grandchildren) is gone;
* no token: the bearer token is in no effect, result, error, log line, journal or fake stderr.

Stdio faults: the fake takes its faults from a plan file read at each process start, so each
example draws its stdio plan at load (``nth`` counted across respawns); at run time the machine
SIGKILLs (a crash, also in the middle of a call) or SIGSTOPs (a stall) the live child.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from palace_bridge.config import BridgeConfig
from palace_bridge.deadlines import ReapBudget
from palace_bridge.errors import PalaceError
from palace_bridge.extension import Bridge, activate
from palace_bridge.features.feeding import MINE_GUARD_S
from palace_bridge.host import RecordingHost
from palace_conformance.fake.journal import Journal, JournalTail
from palace_conformance.hosts.reference import error_payload
from palace_conformance.processes import alive, argv_of

from .support import SLACK_S, HttpFake, Scenario, remote_env

TOKEN = "sm-bearer-Q7x2-must-never-be-printed"
ROTATED = "sm-rotated-Zk3"  # the token a rotate_token fault makes the fake demand instead
KNOBS = {
    "MEMPALACE_MCP_TIMEOUT_MS": "300",
    "MEMPALACE_MCP_INIT_TIMEOUT_MS": "1000",
    "MEMPALACE_MCP_RESPAWN_BACKOFF_MS": "50",
    "MEMPALACE_MCP_KILL_GRACE_MS": "200",
    "MEMPALACE_REMOTE_CONNECT_RETRIES": "1",
    "MEMPALACE_REMOTE_CONNECT_BACKOFF_MS": "20",
    "MEMPALACE_EXT_DEBUG": "1",  # every debug line is one more place the token must not be
    "MEMPALACE_FEED_DEBOUNCE_MS": "0",
    "MEMPALACE_FEED_PREPARE_TIMEOUT_MS": "3000",
    "MEMPALACE_FEED_MINE_TIMEOUT_MS": "300",
    "MEMPALACE_MAILBOX_POLL_MS": "0",
}
#: past this an op is stuck for good: fail the example rather than hang pytest
HARD_CAP_S = 90.0
READS = ("mempalace_status", "mempalace_search", "mempalace_list_wings")
WRITE = "mempalace_add_drawer"
ECHO = f"Authorization: Bearer {TOKEN}"  # what a careless server echoes back


@dataclass
class Tally:
    """What a run did, summed over its examples (reported by the test, recorded in BENCHMARKS)."""

    examples: int = 0
    steps: int = 0
    calls: int = 0
    call_errors: dict[str, int] = field(default_factory=dict)
    events: int = 0
    faults_armed: int = 0
    faults_fired: int = 0
    signals: int = 0
    invariant_checks: int = 0
    spawns: int = 0
    op_seconds: dict[str, float] = field(default_factory=dict)  # wall time per kind of op

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class Budget:
    """Worst cases the knobs allow, in seconds (the deadline invariant's upper bounds)."""

    request_s: float
    init_s: float
    end_child_s: float  # stdin closed, SIGTERM, SIGKILL, reaped: every wait bounded
    spawn_series_s: float  # a first start or a respawn run to its end, failures included
    connect_s: float  # a remote start: every connect attempt and its backoff

    @classmethod
    def of(cls, config: BridgeConfig) -> Budget:
        grace_s = config.kill_grace_ms / 1000
        reap = ReapBudget(config.kill_grace_ms)
        end_child = 2 * grace_s + (reap.after_kill_ms + reap.drain_ms) / 1000
        attempts = config.max_respawns + 1
        backoff_s = config.respawn_backoff_ms / 1000 * 2 ** config.max_respawns
        init_s = config.init_timeout_ms / 1000
        request_s = config.timeout_ms / 1000
        spawn_series = attempts * (backoff_s + init_s + request_s + end_child) + end_child
        connect = ((config.connect_retries + 1) * (init_s + request_s)
                   + config.connect_backoff_ms / 1000 * 2 ** config.connect_retries)
        return cls(request_s, init_s, end_child, spawn_series, connect)


class BridgeMachine(RuleBasedStateMachine):
    """Common rules and invariants; a subclass supplies the transport (``remote``)."""

    remote: ClassVar[bool] = False
    base: ClassVar[Path]  # a per-test directory; each example gets a subdirectory
    tally: ClassVar[Tally]
    counter: ClassVar[list[int]]  # examples started in this test (names their directories)

    def __init__(self) -> None:
        super().__init__()
        type(self).counter[0] += 1
        self.tally.examples += 1
        self.root = self.base / f"example-{type(self).counter[0]}"
        self.scenario = Scenario(self.root)  # the shim on PATH: in remote mode, a trap
        self.loop = asyncio.new_event_loop()
        self.host = RecordingHost(echo_stderr=False)
        self.bridge: Bridge | None = None
        self.config = BridgeConfig()
        self.budget = Budget.of(self.config)
        self.shut = False
        self.writes = 0
        self.outputs: list[str] = []  # results and error texts the host saw
        self.problems: list[str] = []  # invariant breaches noticed inside rules
        self.scanned_effects = 0
        self.scanned_outputs = 0
        self.stdio_journal = Journal(self.scenario.journal_path, "observer")
        self.stdio_tail = JournalTail(self.stdio_journal)
        self.stdio_records: list[dict[str, Any]] = []
        self.http_records: list[dict[str, Any]] = []
        self.budget_mark = 0  # index in stdio_records where the respawn budget was last full
        self.shut_mark: int | None = None

    # -- plumbing ----------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def refresh(self) -> None:
        """Read what the fakes journaled since the last look."""
        self.stdio_records += self.stdio_tail.new_records()

    def renewals(self) -> int:
        """Handshakes seen so far: spawns (stdio) or initialize requests (HTTP)."""
        self.refresh()
        if self.remote:
            return sum(1 for r in self.http_records if r.get("kind") == "recv"
                       and r.get("method") == "initialize")
        return sum(1 for r in self.stdio_records if r.get("kind") == "process_start")

    def busy(self) -> bool:
        return bool(self.bridge is not None and self.bridge._tasks)

    def timed(self, what: str, work: Awaitable[Any], bound: Callable[[bool], float]) -> Any:
        """Run ``work`` to its end on this example's loop; its wall time must stay within
        ``bound(renewed)`` plus the slack, ``renewed`` telling whether a (re)spawn or a
        session handshake happened meanwhile or the op shared the bridge with other work."""
        shared = self.busy()
        before = self.renewals()
        began = time.monotonic()
        try:
            return self.loop.run_until_complete(asyncio.wait_for(work, HARD_CAP_S))
        except TimeoutError:
            self.problems.append(f"{what} still running after {HARD_CAP_S} s")
            return None
        finally:
            elapsed = time.monotonic() - began
            spent = self.tally.op_seconds
            spent[what] = round(spent.get(what, 0.0) + elapsed, 3)
            renewed = shared or self.renewals() != before
            limit = bound(renewed) + SLACK_S
            if elapsed > limit:
                self.problems.append(f"{what} took {elapsed:.2f} s, past its bound {limit:.2f} s")

    def call_bound(self, calls: int = 1) -> Callable[[bool], float]:
        budget = self.budget

        def bound(renewed: bool) -> float:
            if not renewed:
                return calls * budget.request_s
            if self.remote:  # a renewal before the call, a 404, a renewal and the retry
                return calls * 2 * (budget.init_s + budget.request_s)
            return calls * (budget.request_s + budget.spawn_series_s)

        return bound

    async def call(self, name: str, args: dict[str, Any]) -> None:
        """One host-side tool call; what it ended in is checked against DRIVER.md's kinds."""
        self.tally.calls += 1
        tool = self.host.tools.get(name)
        if tool is None:
            if self.bridge is not None and self.bridge.available:
                self.problems.append(f"{name} is not registered although the palace is up")
            self._count("no_such_tool")
            return
        try:
            outcome = await tool.execute("call", dict(args))
        except PalaceError as exc:
            payload = error_payload(exc)
            self._count(payload["kind"])
            self.outputs.append(json.dumps(payload, default=str) + " " + repr(exc))
            if payload["kind"] == "exception":
                self.problems.append(f"{name}: an unmapped PalaceError reached the host: {exc!r}")
        except Exception as exc:  # the invariant: nothing else ever reaches the host
            self._count("exception")
            self.problems.append(f"{name}: {type(exc).__name__} reached the host: {exc!r}")
        else:
            self._count("result_error" if outcome.is_error else "result")
            self.outputs.append(json.dumps({"content": outcome.content,
                                            "details": outcome.details}, default=str))

    def _count(self, kind: str) -> None:
        self.tally.call_errors[kind] = self.tally.call_errors.get(kind, 0) + 1

    def next_marker(self) -> str:
        """Unique across the test's examples: they share one HTTP fake, and a write an earlier
        example left in flight may land after the next one has started watching."""
        self.writes += 1
        return f"sm-{self.root.name}-write-{self.writes}"

    def write_args(self, marker: str) -> dict[str, Any]:
        return {"wing": "wing_sm", "room": "room_sm", "content": f"drawer {marker} body"}

    def load(self) -> None:
        env = self.env()
        self.config = BridgeConfig.from_env(env)
        self.budget = Budget.of(self.config)
        self.host = RecordingHost(echo_stderr=False)
        self.scanned_effects = 0
        self.shut = False
        self.refresh()
        self.budget_mark = len(self.stdio_records)
        self.shut_mark = None
        start_bound = self.budget.connect_s if self.remote else self.budget.spawn_series_s
        self.bridge = self.timed("load", activate(self.host, env), lambda _: start_bound)

    def shutdown(self) -> None:
        if self.bridge is None or self.shut:
            return
        self.tally.events += 1
        budget = self.budget
        bound = (self.config.feed_prepare_timeout_ms / 1000
                 + self.config.feed_mine_timeout_ms / 1000 + MINE_GUARD_S
                 + 2 * budget.end_child_s + budget.request_s)
        self.timed("session_shutdown", self.host.emit("session_shutdown", {"reason": "quit"}),
                   lambda _: bound)
        self.shut = True
        self.refresh()
        self.shut_mark = len(self.stdio_records)

    # -- rules: pi's part --------------------------------------------------------------------

    @rule(tool=st.sampled_from(READS), query=st.text(max_size=20))
    def read_call(self, tool: str, query: str) -> None:
        args = {"query": query or "q"} if tool == "mempalace_search" else {}
        self.timed(tool, self.call(tool, args), self.call_bound())

    @rule()
    def write_call(self) -> None:
        marker = self.next_marker()
        self.timed(WRITE, self.call(WRITE, self.write_args(marker)), self.call_bound())

    @rule(tool=st.sampled_from(READS))
    def concurrent_calls(self, tool: str) -> None:
        """A write and a read in flight together: they share one child or one session."""
        marker = self.next_marker()

        async def both() -> None:
            await asyncio.gather(self.call(WRITE, self.write_args(marker)), self.call(tool, {}))

        self.timed("two calls at once", both(), lambda renewed: self.call_bound(2)(True))

    @rule(reason=st.sampled_from(["startup", "new", "resume", "fork", "reload"]))
    def session_start(self, reason: str) -> None:
        self.tally.events += 1
        self.timed("session_start", self.host.emit("session_start", {"reason": reason}),
                   lambda _: 0.0)

    @rule()
    def before_agent_start(self) -> None:
        """The wake-up: status, diary and (shared palace) the mailbox, one after another."""
        self.tally.events += 1
        self.timed("before_agent_start", self.host.emit("before_agent_start", {"prompt": "hi"}),
                   self.call_bound(3))

    @rule()
    def agent_settled(self) -> None:
        """Feeding and the mailbox run in the background; the event itself returns at once."""
        self.tally.events += 1
        self.timed("agent_settled", self.host.emit("agent_settled", {}), lambda _: 0.0)

    @rule()
    def settle(self) -> None:
        """Wait for the background work (a feed's prepare and mine, a mailbox poll)."""
        if self.bridge is None:
            return
        bound = (self.config.feed_prepare_timeout_ms / 1000 + self.config.feed_mine_timeout_ms
                 / 1000 + MINE_GUARD_S + self.call_bound(3)(True))
        self.timed("settle", self.bridge.drain(), lambda _: bound)

    @rule(topic=st.sampled_from(["", "hardening"]))
    def diary_command(self, topic: str) -> None:
        if "mempalace-diary" in self.host.commands:
            self.timed("diary command", self.host.run_command("mempalace-diary", topic),
                       lambda _: 0.0)

    @precondition(lambda self: not self.shut)
    @rule()
    def session_shutdown(self) -> None:
        self.shutdown()

    @rule()
    def reload(self) -> None:
        """pi's /reload: the old instance shuts down, a new one loads (a fresh budget)."""
        self.shutdown()
        self.load()

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def nothing_hung_or_escaped(self) -> None:
        self.tally.steps += 1  # invariants run once after every rule (the load included)
        self.tally.invariant_checks += 1
        errors = [e for e in self.host.effects if e["kind"] == "error"]
        internal = [e for e in self.host.effects
                    if e["kind"] == "stderr" and "internal error" in e["line"]]
        assert not self.problems, self.problems
        assert not errors, f"an event handler raised: {errors}"
        assert not internal, f"a background task crashed: {internal}"

    @invariant()
    def no_replayed_write(self) -> None:
        self.tally.invariant_checks += 1
        self.refresh()
        records = self.http_records if self.remote else self.stdio_records
        statuses = {r.get("conn"): r.get("status") for r in records
                    if r.get("kind") == "http_response"}
        seen: dict[str, list[dict[str, Any]]] = {}
        for record in records:
            if record.get("kind") != "recv" or record.get("tool") != WRITE:
                continue
            content = str(record["message"].get("params", {}).get("arguments", {}).get("content"))
            seen.setdefault(content, []).append(record)
        for content, arrivals in seen.items():
            # HTTP-04: a 404 on a held session means "not run"; one retry after it is the rule
            renewed = sum(1 for r in arrivals if statuses.get(r.get("conn")) == 404
                          and "mcp-session-id" in r.get("http", {}).get("headers", {}))
            assert len(arrivals) <= 1 + min(renewed, 1), (
                f"{content!r} reached the palace {len(arrivals)} times "
                f"({renewed} answered 404 on a session)")

    @invariant()
    def respawns_within_budget(self) -> None:
        self.tally.invariant_checks += 1
        self.refresh()
        starts = [i for i, r in enumerate(self.stdio_records) if r.get("kind") == "process_start"]
        if self.remote:
            assert not starts, f"a local child started in remote mode: {starts}"
            if self.bridge is not None:
                assert self.bridge.client.child_pids == []  # type: ignore[attr-defined]
            assert not local_children(), local_children()
            return
        if self.shut_mark is not None:
            late = [i for i in starts if i >= self.shut_mark]
            assert not late, "a child was spawned after session_shutdown"
        # the budget is full again after load and after any success of a handshaken child
        mark, ready = self.budget_mark, set()
        for i, record in enumerate(self.stdio_records):
            if i < self.budget_mark or record.get("kind") != "send":
                continue
            message = record.get("message") or {}
            result = message.get("result")
            if isinstance(result, dict) and "tools" in result:
                ready.add(record["pid"])
            if "result" in message and record["pid"] in ready:
                mark = i
        since = [i for i in starts if i > mark]
        allowed = self.config.max_respawns + (1 if mark == self.budget_mark else 0)
        assert len(since) <= allowed, (
            f"{len(since)} spawns since the budget was last full; allowed {allowed}")

    @invariant()
    def token_in_no_output(self) -> None:
        self.tally.invariant_checks += 1
        new_effects = self.host.effects[self.scanned_effects:]
        self.scanned_effects = len(self.host.effects)
        new_outputs = self.outputs[self.scanned_outputs:]
        self.scanned_outputs = len(self.outputs)
        for text in [json.dumps(e, default=str) for e in new_effects] + new_outputs:
            assert TOKEN not in text, f"the token leaked: {text[:300]}"

    # -- teardown ----------------------------------------------------------------------------

    def teardown(self) -> None:
        began = time.monotonic()
        try:
            if self.bridge is not None:
                self.shutdown()
            self.refresh()
            self.tally.spawns += sum(1 for r in self.stdio_records
                                     if r.get("kind") == "process_start")
            self.tally.faults_fired += sum(1 for r in self.stdio_records + self.http_records
                                           if r.get("kind") == "fault")
            started = [r["pid"] for r in self.stdio_records
                       if r.get("kind") in ("process_start", "descendant_start")]
            deadline = time.monotonic() + self.budget.end_child_s + SLACK_S
            while any(alive(p) for p in started) and time.monotonic() < deadline:
                time.sleep(0.05)
            orphans = [(p, argv_of(p)) for p in started if alive(p)]
            for pid, _ in orphans:  # ours: the bridge started them; leave the machine clean
                with contextlib.suppress(ProcessLookupError):  # it may end meanwhile
                    os.kill(pid, signal.SIGKILL)
            assert not orphans, f"processes left after shutdown: {orphans}"
            for record in self.stdio_records:
                assert not leaks(record), f"the token in what the bridge sent: {record}"
            self.check_teardown()
            assert not self.problems, self.problems
        finally:
            spent = self.tally.op_seconds
            spent["teardown"] = round(spent.get("teardown", 0.0) + time.monotonic() - began, 3)
            self.stdio_journal.close()
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def check_teardown(self) -> None:
        """Transport-specific checks once the bridge is gone."""


#: journal records of what the bridge sent or started: the fake's own answers (``send``, and the
#: ``fault`` records that name them) echo the token on purpose and are not the bridge's output
BRIDGE_SIDE = frozenset({"recv", "http_request", "process_start", "feed_prepare", "control"})


def leaks(record: dict[str, Any]) -> bool:
    return record.get("kind") in BRIDGE_SIDE and TOKEN in json.dumps(record)


def local_children() -> list[tuple[int, list[str]]]:
    """This process's children that run a palace server shim (remote mode must have none)."""
    mine = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid != mine:
            continue
        argv = argv_of(int(entry))
        if any("mempalace-mcp" in a or "palace-fake-mcp" in a for a in argv):
            found.append((int(entry), argv))
    return found


# -- stdio --------------------------------------------------------------------------------------

STDIO_FAULTS = st.one_of(
    st.builds(lambda tool, n: {"action": "stall", "on": {"tool": tool, "nth": n}},
              st.sampled_from([WRITE, *READS]), st.integers(1, 6)),
    st.builds(lambda n, ms: {"action": "delay", "ms": ms, "on": {"method": "tools/call", "nth": n}},
              st.integers(1, 8), st.integers(50, 600)),
    st.builds(lambda tool, n, when: {"action": "exit", "when": when, "code": 75,
                                     "on": {"tool": tool, "nth": n}},
              st.sampled_from([WRITE, *READS]), st.integers(1, 6),
              st.sampled_from(["before_reply", "after_reply"])),
    st.builds(lambda n: {"action": "lock_held", "on": {"tool": WRITE, "nth": n}},
              st.integers(1, 4)),
    st.builds(lambda n: {"action": "error", "code": -32000, "message": f"boom: {ECHO}",
                         "data": {"seen": [ECHO]}, "on": {"method": "tools/call", "nth": n}},
              st.integers(1, 8)),
    st.builds(lambda action, n: {"action": action, "on": {"method": "tools/call", "nth": n}},
              st.sampled_from(["garbage", "partial_line", "duplicate_response", "wrong_id"]),
              st.integers(1, 8)),
    st.builds(lambda n, times: {"action": "startup_fail", "code": 1, "times": times,
                                "stderr": f"palace is held by PID 42 {ECHO}",
                                "on": {"method": "$startup", "nth": n}},
              st.integers(2, 4), st.integers(1, 3)),
    st.builds(lambda n, ms: {"action": "delay", "ms": ms, "on": {"method": "initialize", "nth": n}},
              st.integers(2, 4), st.sampled_from([100, 1200])),
    st.builds(lambda n: {"action": "ignore_sigterm", "on": {"method": "$startup", "nth": n}},
              st.integers(1, 3)),
    st.builds(lambda n: {"action": "spawn_grandchild", "lifetime_ms": 30000,
                         "on": {"method": "$startup", "nth": n}},
              st.integers(1, 3)),
)


class StdioMachine(BridgeMachine):
    """The local child: the fake as ``mempalace-mcp`` on PATH, its plan drawn at load."""

    remote = False

    def __init__(self) -> None:
        super().__init__()
        self.respawns = "2"

    def env(self) -> dict[str, str]:
        env = self.scenario.env
        env.update(KNOBS)
        env["MEMPALACE_MCP_MAX_RESPAWNS"] = self.respawns
        env["MEMPALACE_REMOTE_TOKEN"] = TOKEN  # exported, unused: still a secret to keep
        env["PALACE_FEED_OUTDIR"] = str(self.root / "feed")
        return env

    @initialize(faults=st.lists(STDIO_FAULTS, max_size=4),
                respawns=st.sampled_from(["0", "1", "2", "3"]))
    def start(self, faults: list[dict[str, Any]], respawns: str) -> None:
        self.respawns = respawns
        self.scenario.plan = {"faults": [dict(f, id=f"sm-{i}") for i, f in enumerate(faults)]}
        self.tally.faults_armed += len(faults)
        self.load()

    def child(self, index: int) -> int | None:
        pids = self.bridge.client.child_pids if self.bridge is not None else []  # type: ignore
        return pids[index % len(pids)] if pids else None

    def signal_child(self, index: int, sig: signal.Signals) -> None:
        pid = self.child(index)
        if pid is not None and alive(pid):
            self.tally.signals += 1
            # the child may die on its own between the check and the signal (a fault's exit,
            # the bridge's kill): then there is nothing left to signal
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    @rule(index=st.integers(0, 3))
    def crash_child(self, index: int) -> None:
        self.signal_child(index, signal.SIGKILL)

    @rule(index=st.integers(0, 3))
    def stall_child(self, index: int) -> None:
        """SIGSTOP: the child is alive and silent, a stall only the deadline ends."""
        self.signal_child(index, signal.SIGSTOP)

    @rule(delay_ms=st.integers(0, 150))
    def crash_during_write(self, delay_ms: int) -> None:
        """The child dies while a write is in flight: an uncertain failure, never replayed."""
        marker = self.next_marker()

        async def crash_soon() -> None:
            await asyncio.sleep(delay_ms / 1000)
            self.signal_child(0, signal.SIGKILL)

        async def both() -> None:
            await asyncio.gather(self.call(WRITE, self.write_args(marker)), crash_soon())

        self.timed("write with a crash", both(), self.call_bound())


# -- HTTP ---------------------------------------------------------------------------------------

def _http(action: str, on: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"action": action, "on": on, **params}


CALL = {"method": "tools/call"}
HTTP_FAULTS = st.one_of(
    st.builds(lambda tool: _http("stall", {"tool": tool}), st.sampled_from([WRITE, *READS])),
    st.builds(lambda ms: _http("delay", CALL, ms=ms), st.integers(50, 600)),
    st.builds(lambda n: _http("reset", {"tool": WRITE}, after_bytes=n), st.sampled_from([0, 20])),
    st.builds(lambda s: _http("http_status", CALL, status=s), st.sampled_from([500, 502, 503])),
    # times 2: the retry after the renewal meets a 404 too, and must not be retried again
    st.builds(lambda tool, times: _http("http_status", {"tool": tool}, status=404, times=times),
              st.sampled_from([WRITE, *READS]), st.integers(1, 2)),
    st.builds(lambda tool, times: _http("forget_session", {"tool": tool}, times=times),
              st.sampled_from([WRITE, *READS]), st.integers(1, 2)),
    st.just(_http("rotate_token", CALL, token=ROTATED)),
    st.just(_http("http_status", CALL, status=401)),
    st.just(_http("lock_held", {"tool": WRITE})),
    st.just(_http("error", CALL, code=-32000, message=f"boom: {ECHO}", data={"seen": [ECHO]})),
    st.just(_http("http_status", CALL, status=500, body={
        "jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": f"crashed on {ECHO}"}})),
    st.sampled_from([_http(a, CALL) for a in ("garbage", "accept_202", "partial_line",
                                              "duplicate_response", "wrong_id")]),
    st.just(_http("sse", CALL, keepalives=2, event_delay_ms=50)),
    st.just(_http("content_type", CALL, value="text/html")),
    st.builds(lambda ms: _http("delay", {"method": "initialize"}, ms=ms),
              st.sampled_from([100, 1200])),
    st.builds(lambda n: _http("stall", {"method": "ping", "nth": n}), st.integers(1, 2)),
)

#: faults to arm together, each with the occurrence it fires on
ARMED = st.lists(st.tuples(HTTP_FAULTS, st.integers(1, 3)), max_size=3)


class HttpMachine(BridgeMachine):
    """The remote palace: one ``fake http --sessions`` process per test, reset per example."""

    remote = True
    fake: ClassVar[HttpFake]

    def __init__(self) -> None:
        super().__init__()
        self.fake.reset(token=TOKEN)
        self.http_tail = JournalTail(Journal(self.fake.journal_path, "observer"))
        self.http_tail.skip_to_end()  # earlier examples' records are theirs
        self.stderr_mark = self.fake.stderr_path.stat().st_size
        self.device = ""
        self.keepalive = False

    def env(self) -> dict[str, str]:
        env = remote_env(self.fake.url, **KNOBS)
        env["MEMPALACE_REMOTE_TOKEN"] = TOKEN
        env["PATH"] = self.scenario.env["PATH"]  # the stdio shim is there: it must stay unused
        env["PALACE_FAKE_JOURNAL"] = str(self.scenario.journal_path)
        env["HOME"] = str(self.scenario.home)
        if self.device:
            env["MEMPALACE_PI_DEVICE"] = self.device  # shared palace: mailbox and provenance
        if self.keepalive:
            env["MEMPALACE_MCP_KEEPALIVE_MS"] = "150"
        return env

    def refresh(self) -> None:
        super().refresh()
        self.http_records += self.http_tail.new_records()

    @initialize(device=st.sampled_from(["", "sm-laptop"]), keepalive=st.booleans(),
                faults=ARMED)
    def start(self, device: str, keepalive: bool, faults: list[tuple[dict[str, Any], int]]
              ) -> None:
        self.device = device
        self.keepalive = keepalive
        self.load()
        self.arm(faults)

    @rule(faults=ARMED.filter(bool))
    def inject(self, faults: list[tuple[dict[str, Any], int]]) -> None:
        self.arm(faults)

    def arm(self, faults: list[tuple[dict[str, Any], int]]) -> None:
        """``fake ctl inject``: armed now, each counts only messages from now on."""
        if not faults:
            return
        armed = [dict(fault, on=dict(fault["on"], nth=fault["on"].get("nth", nth)))
                 for fault, nth in faults]
        self.fake.control("POST", "faults", armed)
        self.tally.faults_armed += len(armed)

    @rule()
    def forget_sessions(self) -> None:
        """The server restarts its session table: the next request meets a 404."""
        self.fake.control("POST", "sessions/forget")

    @rule()
    def restore_token(self) -> None:
        """The operator puts the bridge's token back after a rotation."""
        self.fake.control("POST", "token", {"token": TOKEN})

    @rule()
    def clear_faults(self) -> None:
        self.fake.control("DELETE", "faults")

    def check_teardown(self) -> None:
        self.fake.control("DELETE", "faults")
        self.refresh()
        for record in self.http_records:
            assert not leaks(record), f"the token in what the bridge sent: {record}"
        with open(self.fake.stderr_path, "rb") as handle:
            handle.seek(self.stderr_mark)
            assert TOKEN.encode() not in handle.read(), "token in the fake's stderr"
        self.http_tail.journal.close()
