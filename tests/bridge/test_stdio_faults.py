"""STDIO behaviours: timeouts, kill, respawn budget, fail-soft, stderr, crashes, junk lines.

Knobs are shrunk (300 ms timeouts, 50 ms backoff); timing checks are a lower bound plus slack.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from palace_bridge.errors import (
    PalaceConnectionClosed,
    PalaceTimeout,
    PalaceToolError,
    PalaceUnavailable,
)
from palace_bridge.stdio import StdioConnection

from .support import SLACK_S, Scenario, alive, eventually, run, wait_until


@pytest.fixture
def scenario(tmp_path):
    return Scenario(tmp_path)


async def call_status(client, **kwargs):
    return await client.call_tool("mempalace_status", {}, **kwargs)


def calls(scenario, tool="mempalace_status"):
    return [r for r in scenario.received("tools/call") if r.get("tool") == tool]


# -- STDIO-01 / 02: per-request timeout, kill, no retry ------------------------------------------

def test_stdio01_stalled_call_times_out_within_slack(scenario):
    scenario.faults = ["stall@mempalace_status"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="300")
        await client.start()
        began = time.monotonic()
        with pytest.raises(PalaceTimeout) as caught:
            await call_status(client)
        elapsed = time.monotonic() - began
        await client.stop()
        return elapsed, caught.value

    elapsed, error = run(main())
    assert 0.3 <= elapsed < 0.3 + SLACK_S
    assert error.method == "tools/call" and error.timeout_ms == 300
    assert "timed out after 300 ms" in str(error)


def test_stdio01_per_call_timeout_override(scenario):
    scenario.faults = ["delay@mempalace_status,ms=400"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="200")
        await client.start()
        result = await call_status(client, timeout_ms=2000)
        await client.stop()
        return result

    assert not run(main()).is_error


def test_stdio02_timeout_kills_the_child_sigterm_then_sigkill_and_does_not_retry(scenario):
    scenario.faults = ["stall@mempalace_status", "ignore_sigterm@$startup"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_KILL_GRACE_MS="300")
        await client.start()
        pid = client.child_pids[0]
        with pytest.raises(PalaceTimeout):
            await call_status(client)
        returned = time.monotonic()
        assert await eventually(lambda: not alive(pid), 5)
        dead = time.monotonic()
        await client.stop()
        return pid, dead - returned

    pid, kill_delay = run(main())
    signals = [r for r in scenario.records("signal") if r["pid"] == pid]
    assert [(s["signal"], s["action"]) for s in signals] == [("SIGTERM", "ignored")]
    assert kill_delay >= 0.25, "SIGKILL only after the grace period"
    assert len(calls(scenario)) == 1, "the timed-out call is not retried"
    assert len(scenario.pids()) == 1, "nothing respawns until the next call"


def test_stdio02_a_polite_child_exits_on_sigterm(scenario):
    scenario.faults = ["stall@mempalace_status"]

    async def main():
        client = scenario.client()
        await client.start()
        pid = client.child_pids[0]
        with pytest.raises(PalaceTimeout):
            await call_status(client)
        assert await eventually(lambda: not alive(pid), 5)
        await client.stop()
        return pid

    pid = run(main())
    assert [(s["signal"], s["action"]) for s in scenario.records("signal")] == \
        [("SIGTERM", "exit")]
    assert [r["reason"] for r in scenario.records("process_exit") if r["pid"] == pid] == \
        ["SIGTERM"]


# -- STDIO-03 / 04: init timeout, 0 = disabled ---------------------------------------------------

def test_stdio03_slow_start_inside_the_init_budget_is_not_killed(scenario):
    scenario.faults = ["delay@initialize,ms=500"]

    async def main():  # a budget far past the delay: a loaded machine starts the child late
        client = scenario.client(MEMPALACE_MCP_INIT_TIMEOUT_MS="10000",
                                 MEMPALACE_MCP_TIMEOUT_MS="100")
        started = await client.start()
        await client.stop()
        return started

    assert run(main())
    assert len(scenario.pids()) == 1
    assert scenario.records("signal") == []


# the delay is far past budget + slack, so only the budget can end the start in time
@pytest.mark.parametrize("fault", ["stall@initialize", "delay@tools/list,ms=30000"])
def test_stdio03_past_the_init_budget_the_child_is_killed(scenario, fault):
    scenario.faults = [fault]

    async def main():
        # 2 s: the fake must have started and journaled before the budget kills it, on a
        # saturated machine too (400 ms lost its process_start record under load)
        client = scenario.client(MEMPALACE_MCP_INIT_TIMEOUT_MS="2000",
                                 MEMPALACE_MCP_MAX_RESPAWNS="0")
        began = time.monotonic()
        started = await client.start()
        return started, time.monotonic() - began

    started, elapsed = run(main())
    assert not started
    assert 2.0 <= elapsed < 2.0 + SLACK_S
    pid = scenario.pids()[0]
    assert wait_until(lambda: not alive(pid))
    assert scenario.records("signal")[0]["signal"] == "SIGTERM"
    assert scenario.received("notifications/cancelled") == [] or fault.startswith("delay"), \
        "initialize is never cancelled"


def test_stdio04_zero_disables_the_request_timeout(scenario):
    scenario.faults = ["delay@mempalace_status,ms=700"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="0")
        await client.start()
        result = await call_status(client)
        await client.stop()
        return result

    assert not run(main()).is_error


def test_stdio04_zero_disables_the_init_timeout(scenario):
    scenario.faults = ["delay@initialize,ms=700"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_INIT_TIMEOUT_MS="0", MEMPALACE_MCP_TIMEOUT_MS="50")
        started = await client.start()
        await client.stop()
        return started

    assert run(main())
    assert len(scenario.pids()) == 1


# -- STDIO-05..09: self-heal ---------------------------------------------------------------------

def test_stdio05_after_a_stall_kill_the_next_call_respawns_and_runs(scenario):
    scenario.faults = ["stall@mempalace_status"]

    async def main():
        client = scenario.client()
        await client.start()
        first = client.child_pids[0]
        with pytest.raises(PalaceTimeout):
            await call_status(client)
        result = await call_status(client)
        second = client.child_pids[0]
        await client.stop()
        return first, second, result

    first, second, result = run(main())
    assert first != second and scenario.pids() == [first, second]
    assert not result.is_error
    second_wire = [r.get("method") for r in scenario.records("recv") if r["pid"] == second]
    assert second_wire == ["initialize", "notifications/initialized", "tools/list", "tools/call"]


def test_stdio05_after_a_crash_the_next_call_respawns(scenario):
    scenario.faults = ["exit@mempalace_status,code=75"]

    async def main():
        client = scenario.client()
        await client.start()
        with pytest.raises(PalaceConnectionClosed) as caught:
            await call_status(client)
        result = await call_status(client)
        await client.stop()
        return caught.value, result

    error, result = run(main())
    assert "code 75" in str(error)
    assert not result.is_error and len(scenario.pids()) == 2


def test_stdio06_respawns_are_capped_with_doubling_backoff(scenario):
    scenario.faults = ["startup_fail@$startupx*,code=1,stderr=palace is held by PID 42"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_MAX_RESPAWNS="3",
                                 MEMPALACE_MCP_RESPAWN_BACKOFF_MS="300")
        started = await client.start()
        began = time.monotonic()
        with pytest.raises(PalaceUnavailable) as caught:
            await call_status(client)
        fail_fast = time.monotonic() - began
        await client.stop()
        return started, caught.value, fail_fast

    started, error, fail_fast = run(main())
    assert not started
    starts = scenario.records("process_start")
    assert len(starts) == 4, "the first start plus MAX_RESPAWNS=3 attempts"
    exits = scenario.records("process_exit")
    assert len(exits) == 4
    # each backoff runs from a child's death to the next child's creation (``created_t``, before
    # its interpreter starts): a loaded machine's slow starts are outside it, so they can neither
    # shorten a gap nor pass a flat backoff off as a doubling one
    gaps = [b.get("created_t", b["t"]) - a["t"] for a, b in zip(exits[:3], starts[1:], strict=True)]
    for gap, backoff in zip(gaps, (0.3, 0.6, 1.2), strict=True):
        assert gap >= backoff, (gaps, "backoff 1x, 2x, 4x")
    assert gaps[2] > gaps[0] + 0.45, "the backoff grows"
    # no fifth spawn, and no wait for the next backoff (2.4 s) either
    assert fail_fast < 2.4 and len(scenario.pids()) == 4, "spent budget: fail fast, no spawn"
    assert "budget spent" in str(error) or "did not start" in str(error)
    lines = [line for line in scenario.stderr.getvalue().splitlines() if line]
    assert lines == [line for line in lines if "continuing without palace tools" in line]
    assert len(lines) == 1, "one line on stderr"


def test_stdio06_budget_spent_mid_session_then_fail_fast(scenario):
    # the child starts fine once, then crashes on a call; every later start fails
    scenario.faults = ["exit@mempalace_status", "startup_fail@$startup#2x*,code=3"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_MAX_RESPAWNS="2",
                                 MEMPALACE_MCP_RESPAWN_BACKOFF_MS="50")
        assert await client.start()
        with pytest.raises(PalaceConnectionClosed):
            await call_status(client)
        with pytest.raises(PalaceUnavailable) as spent:
            await call_status(client)
        spawned = len(scenario.pids())
        began = time.monotonic()
        with pytest.raises(PalaceUnavailable):
            await call_status(client)
        return spent.value, spawned, time.monotonic() - began, client.available

    spent, spawned, fail_fast, available = run(main())
    assert spawned == 3, "the first child plus two respawn attempts"
    assert len(scenario.pids()) == 3 and fail_fast < 0.2
    assert "respawn budget spent (2 attempt(s))" in str(spent)
    assert not available


def test_stdio07_budget_resets_on_a_successful_response(scenario):
    # crash on the 1st and 3rd status call; MAX_RESPAWNS=1 survives both only with a reset
    scenario.faults = ["exit@mempalace_status#1", "exit@mempalace_status#3"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_MAX_RESPAWNS="1")
        await client.start()
        outcomes = []
        for _ in range(4):
            try:
                outcomes.append(not (await call_status(client)).is_error)
            except PalaceConnectionClosed:
                outcomes.append("crash")
        await client.stop()
        return outcomes

    assert run(main()) == ["crash", True, "crash", True]
    assert len(scenario.pids()) == 3


def test_stdio08_max_respawns_zero_is_the_fail_fast_latch(scenario):
    scenario.faults = ["exit@mempalace_status"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_MAX_RESPAWNS="0")
        await client.start()
        with pytest.raises(PalaceConnectionClosed):
            await call_status(client)
        with pytest.raises(PalaceUnavailable) as caught:
            await call_status(client)
        return caught.value

    error = run(main())
    assert "MEMPALACE_MCP_MAX_RESPAWNS=0" in str(error)
    assert len(scenario.pids()) == 1


@pytest.mark.parametrize("fault", [
    "startup_fail@$startup,code=1,stderr=palace is held by PID 42 (mempalace-mcp)",
    "stall@initialize",
])
def test_stdio09_first_start_is_tolerant(scenario, fault):
    scenario.faults = [fault]

    async def main():  # 3 s: the respawned child must start inside it on a loaded machine too
        client = scenario.client(MEMPALACE_MCP_INIT_TIMEOUT_MS="3000")
        started = await client.start()
        result = await call_status(client)
        await client.stop()
        return started, result

    started, result = run(main())
    assert started and not result.is_error
    assert len(scenario.pids()) == 2
    assert "continuing without palace tools" not in scenario.stderr.getvalue()


# -- STDIO-10 / 11: fail-soft, stderr ------------------------------------------------------------

def test_stdio10_cannot_spawn_logs_one_line_and_raises_nothing(tmp_path):
    scenario = Scenario(tmp_path)

    async def main():
        client = scenario.client(PATH=str(tmp_path / "empty"))
        began = time.monotonic()
        started = await client.start()
        return started, time.monotonic() - began

    started, elapsed = run(main())
    lines = scenario.stderr.getvalue().splitlines()
    assert not started and elapsed < 0.5, "no backoff for a binary that is not there"
    assert len(lines) == 1
    assert "mempalace-mcp not found on PATH" in lines[0]
    assert "continuing without palace tools" in lines[0]


def test_stdio10_a_non_executable_binary_is_also_fail_soft(tmp_path):
    scenario = Scenario(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "mempalace-mcp").write_text("not a program")

    async def main():
        client = scenario.client(MEMPALACE_MCP_BIN=str(broken / "mempalace-mcp"))
        return await client.start()

    assert run(main()) is False
    assert "continuing without palace tools" in scenario.stderr.getvalue()


@pytest.mark.parametrize("debug", [False, True])
def test_stdio11_stderr_flood_never_blocks_and_is_silent_unless_debug(scenario, debug):
    scenario.faults = ["flood_stderr@$startup,bytes=1000000",
                       "flood_stderr@mempalace_status,bytes=1000000"]

    async def main():
        knobs = {"MEMPALACE_EXT_DEBUG": "1"} if debug else {}
        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="5000", **knobs)
        assert await client.start()
        result = await call_status(client)
        await client.stop()
        return result

    assert not run(main()).is_error
    text = scenario.stderr.getvalue()
    if debug:
        assert text.count("fake palace stderr flood") > 10000
        assert "MemPalace MCP Server starting..." in text
    else:
        assert text == ""


# -- STDIO-12 / 13: crash mid-request, junk lines ------------------------------------------------

def test_stdio12_child_exit_fails_every_in_flight_call_at_once(scenario):
    scenario.faults = ["delay@mempalace_list_wings,ms=200", "exit@mempalace_status,code=9"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="10000")
        await client.start()
        began = time.monotonic()
        outcomes = await asyncio.gather(
            client.call_tool("mempalace_list_wings", {}),
            call_status(client),
            return_exceptions=True)
        elapsed = time.monotonic() - began
        await client.stop()
        return outcomes, elapsed

    outcomes, elapsed = run(main())
    assert elapsed < 2.0, "not at the 10 s timeout"
    # the stdio server is sequential: list_wings was answered, status crashed it
    assert not outcomes[0].is_error
    assert isinstance(outcomes[1], PalaceConnectionClosed)
    assert "code 9" in str(outcomes[1])


def test_stdio12_two_calls_waiting_on_a_dying_child_both_fail_at_once(scenario):
    scenario.faults = ["exit@mempalace_status,code=9"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="10000")
        await client.start()
        began = time.monotonic()
        outcomes = await asyncio.gather(call_status(client),
                                        client.call_tool("mempalace_list_wings", {}),
                                        return_exceptions=True)
        return outcomes, time.monotonic() - began

    outcomes, elapsed = run(main())
    assert all(isinstance(o, PalaceConnectionClosed) for o in outcomes), outcomes
    assert elapsed < 2.0


@pytest.mark.parametrize("debug", [False, True])
def test_stdio13_malformed_stdout_line_is_dropped_and_the_session_goes_on(scenario, debug):
    scenario.faults = ["garbage@mempalace_status,text=Traceback (most recent call last):"]

    async def main():
        knobs = {"MEMPALACE_EXT_DEBUG": "1"} if debug else {}
        client = scenario.client(**knobs)
        await client.start()
        first = await call_status(client)
        second = await call_status(client)
        await client.stop()
        return first, second

    first, second = run(main())
    assert not first.is_error and not second.is_error
    assert len(scenario.pids()) == 1
    logged = "dropping a malformed line" in scenario.stderr.getvalue()
    assert logged is debug


# -- wire hygiene ---------------------------------------------------------------------------------

def test_server_ping_is_answered_and_other_server_requests_get_method_not_found(scenario):
    scenario.faults = ["server_request@mempalace_status,method=ping",
                       "server_request@mempalace_list_wings,method=sampling/createMessage"]

    async def main():
        client = scenario.client()
        await client.start()
        await call_status(client)
        await client.call_tool("mempalace_list_wings", {})
        await client.stop()

    run(main())
    asked = {r["message"]["method"]: r["message"]["id"] for r in scenario.records("send")
             if r.get("method") in ("ping", "sampling/createMessage")}
    answers = {r["message"]["id"]: r["message"] for r in scenario.records("recv")
               if r.get("response")}
    assert answers[asked["ping"]] == {"jsonrpc": "2.0", "id": asked["ping"], "result": {}}
    assert answers[asked["sampling/createMessage"]]["error"]["code"] == -32601


def test_wrong_id_is_ignored_and_the_call_times_out(scenario):
    # the call is request id 3 (after initialize and tools/list); answer it as the string "3"
    scenario.faults = ['wrong_id@mempalace_status,reply_id="3"']

    async def main():
        client = scenario.client()
        await client.start()
        with pytest.raises(PalaceTimeout):
            await call_status(client)  # id 3 answered as "3": not ours
        await client.stop()

    run(main())
    assert calls(scenario)[0]["id"] == 3
    assert [r["message"]["id"] for r in scenario.records("send")][-1] == "3", "the fault fired"


def test_duplicate_response_is_delivered_once(scenario):
    scenario.faults = ["duplicate_response@mempalace_status"]

    async def main():
        client = scenario.client()
        await client.start()
        first = await call_status(client)
        second = await client.call_tool("mempalace_list_wings", {})
        await client.stop()
        return first, second

    first, second = run(main())
    assert not first.is_error and "wings" in second.text
    assert len(scenario.pids()) == 1


def test_large_result_is_handled(scenario):
    scenario.faults = ["oversized@mempalace_status,bytes=3000000"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="10000")
        await client.start()
        result = await call_status(client)
        await client.stop()
        return result

    result = run(main())
    assert len(result.raw["_padding"]) == 3000000


def test_stdio13_a_message_past_the_bound_fails_its_call_and_restarts_the_child(
        scenario, monkeypatch):
    """docs/choices.md (one stdio message is at most 64 MiB): the call the oversized message
    answers fails at once, the connection closed with the bound as its reason, not after its
    timeout, and the child is restarted,
    since the stream after it cannot be trusted. The reference's own choice, which no scenario
    may pin (another bridge may drop the line, or take it whole); the bound is lowered to 1 MiB
    so the test sends 2 MB, not 64 MiB."""
    monkeypatch.setitem(StdioConnection.__init__.__kwdefaults__, "max_line", 1 << 20)
    scenario.faults = ["oversized@mempalace_status,bytes=2000000"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="20000")
        await client.start()
        with pytest.raises(PalaceConnectionClosed, match="grew past 1048576 bytes"):
            await call_status(client)
        after = await call_status(client)
        await client.stop()
        return after

    assert not run(main()).is_error
    assert len(scenario.pids()) == 2


def test_partial_line_then_exit_is_a_closed_connection(scenario):
    scenario.faults = ["partial_line@mempalace_status,then=exit,code=1"]

    async def main():
        client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="10000")
        await client.start()
        with pytest.raises(PalaceConnectionClosed):
            await call_status(client)
        after = await call_status(client)
        await client.stop()
        return after

    assert not run(main()).is_error


def test_tool_error_then_the_session_goes_on_without_respawn(scenario):
    async def main():
        client = scenario.client()
        await client.start()
        with pytest.raises(PalaceToolError):
            await client.call_tool("mempalace_diary_read", {})
        await call_status(client)
        await client.stop()

    run(main())
    assert len(scenario.pids()) == 1
