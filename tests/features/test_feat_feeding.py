"""FEED-*: the feed policy over a recording host, a scripted exec, a fake client and clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from palace_bridge.clock import FakeClock
from palace_bridge.errors import PalaceTimeout, PalaceToolError
from palace_bridge.features import feeding
from palace_bridge.features.feeding import Feeder, FeedSettings, Outcome, mine_source
from palace_bridge.features.provenance import Stamper
from palace_bridge.host import ExecResult, RecordingHost

from .fakes import FakeClient, ScriptedExec, result

SOURCE = ExecResult("MINE_SOURCE=/staged/export-1.jsonl\n", "", 0)
NOTHING = ExecResult("", "", 0)
WEDGED = ExecResult("", "", None, killed=True)


def make(settings: FeedSettings | None = None, results: list[ExecResult] | None = None,
         client: FakeClient | None = None, device: str | None = None,
         env: dict[str, str] | None = None) -> tuple[Feeder, RecordingHost, ScriptedExec,
                                                     FakeClient, FakeClock]:
    scripted = ScriptedExec(results or [SOURCE])
    host = RecordingHost(exec_impl=scripted)
    client = client or FakeClient()
    clock = FakeClock()
    feeder = Feeder(settings or FeedSettings(), host, client, Stamper(device), clock,
                    env or {"HOME": "/home/pi"})
    return feeder, host, scripted, client, clock


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def settle(feeder: Feeder) -> Outcome | None:
    task = feeder.settled()
    return await task if task is not None else None


def test_shutdown_prepares_then_mines_through_the_client() -> None:
    feeder, host, scripted, client, _ = make()
    assert run(feeder.shutdown()) is Outcome.MINED
    assert scripted.calls[0]["argv"] == ["mempalace-pi-session", "--prepare", "--reason",
                                         "session_shutdown", "--wing", "wing_conversations"]
    assert scripted.calls[0]["timeout_ms"] == 120000
    assert scripted.calls[0]["env"] == {"HOME": "/home/pi"}
    assert client.calls == [("mempalace_mine", {"source": "/staged/export-1.jsonl",
                                                "wing": "wing_conversations"}, 30000)]
    # never the mempalace CLI: the only subprocess is the exporter
    assert [e["argv"][0] for e in host.of_kind("exec")] == ["mempalace-pi-session"]


def test_knobs_reach_prepare_and_mine() -> None:
    settings = FeedSettings(bin="/opt/bin/exporter", wing="wing_pi_chats", prepare_timeout_ms=500,
                            mine_timeout_ms=700)
    feeder, _, scripted, client, _ = make(settings)
    run(feeder.shutdown())
    assert scripted.calls[0]["argv"] == ["/opt/bin/exporter", "--prepare", "--reason",
                                         "session_shutdown", "--wing", "wing_pi_chats"]
    assert scripted.calls[0]["timeout_ms"] == 500
    assert client.calls == [("mempalace_mine", {"source": "/staged/export-1.jsonl",
                                                "wing": "wing_pi_chats"}, 700)]


def test_zero_timeouts_mean_unbounded() -> None:
    feeder, _, scripted, client, _ = make(FeedSettings(prepare_timeout_ms=0, mine_timeout_ms=0))
    run(feeder.shutdown())
    assert scripted.calls[0]["timeout_ms"] is None
    assert client.calls[0][2] is None


def test_disabled_feeding_does_nothing() -> None:
    feeder, host, scripted, client, _ = make(FeedSettings(enabled=False))

    async def scenario() -> None:
        assert feeder.settled() is None
        assert await feeder.shutdown() is None

    run(scenario())
    assert scripted.calls == [] and client.calls == [] and host.effects == []


def test_settled_is_debounced() -> None:
    feeder, _, scripted, _, clock = make(FeedSettings(debounce_ms=600000))

    async def scenario() -> None:
        assert await settle(feeder) is Outcome.MINED  # the first settle feeds at once
        clock.advance(599999)
        assert feeder.settled() is None  # inside the window
        clock.advance(1)
        assert await settle(feeder) is Outcome.MINED  # window over
        assert scripted.calls[-1]["argv"][3] == "agent_settled"

    run(scenario())
    assert len(scripted.calls) == 2


def test_shutdown_is_not_debounced() -> None:
    feeder, _, scripted, _, _ = make()

    async def scenario() -> None:
        await settle(feeder)
        assert await feeder.shutdown() is Outcome.MINED

    run(scenario())
    assert [c["argv"][3] for c in scripted.calls] == ["agent_settled", "session_shutdown"]


def test_overlapping_triggers_coalesce_into_one_prepare_and_one_mine() -> None:
    feeder, _, scripted, client, _ = make()

    async def scenario() -> None:
        scripted.gate = asyncio.Event()
        first = feeder.settled()
        assert first is not None
        await asyncio.sleep(0)  # the prepare is now running
        assert feeder.settled() is None  # a second settle joins
        shutdown = asyncio.ensure_future(feeder.shutdown())  # and so does the shutdown
        await asyncio.sleep(0.01)
        assert not shutdown.done()  # it waits for the in-flight feed
        scripted.gate.set()
        assert await shutdown is Outcome.MINED
        assert await first is Outcome.MINED

    run(scenario())
    assert len(scripted.calls) == 1
    assert len(client.called("mempalace_mine")) == 1


def test_shutdown_while_the_mine_is_in_flight_joins_it() -> None:
    feeder, _, scripted, client, _ = make()

    async def scenario() -> None:
        client.gates["mempalace_mine"] = asyncio.Event()
        first = feeder.settled()
        while not client.calls:
            await asyncio.sleep(0)
        shutdown = asyncio.ensure_future(feeder.shutdown())
        await asyncio.sleep(0.01)
        client.gates["mempalace_mine"].set()
        await asyncio.gather(first, shutdown)

    run(scenario())
    assert len(scripted.calls) == 1 and len(client.called("mempalace_mine")) == 1


def test_after_shutdown_no_more_feeds() -> None:
    feeder, _, scripted, _, clock = make()

    async def scenario() -> None:
        await feeder.shutdown()
        clock.advance(10**9)
        assert feeder.settled() is None
        assert await feeder.shutdown() is None

    run(scenario())
    assert len(scripted.calls) == 1


def test_a_wedged_prepare_is_killed_no_mine_and_the_next_trigger_works() -> None:
    feeder, host, scripted, client, _ = make(FeedSettings(prepare_timeout_ms=250),
                                             [WEDGED, SOURCE])

    async def scenario() -> None:
        assert await settle(feeder) is Outcome.PREPARE_TIMEOUT
        assert client.calls == []
        # the failed feed did not charge the debounce window: the very next trigger runs
        assert await settle(feeder) is Outcome.MINED

    run(scenario())
    assert len(scripted.calls) == 2 and len(client.called("mempalace_mine")) == 1
    lines = [e["line"] for e in host.of_kind("stderr")]
    assert len(lines) == 1 and "killed after 250 ms" in lines[0]


def test_no_mine_source_means_no_mine() -> None:
    feeder, host, _, client, clock = make(results=[NOTHING, SOURCE])

    async def scenario() -> None:
        assert await settle(feeder) is Outcome.NOTHING
        clock.advance(1000)
        assert feeder.settled() is None  # nothing to feed is a success: the window is charged

    run(scenario())
    assert client.calls == [] and host.of_kind("stderr") == []


def test_a_failing_prepare_is_reported_and_not_mined() -> None:
    failing = ExecResult("MINE_SOURCE=/half/written\n", "flock busy\n", 3)
    feeder, host, _, client, _ = make(results=[failing])
    assert run(feeder.shutdown()) is Outcome.PREPARE_FAILED
    assert client.calls == []
    [line] = [e["line"] for e in host.of_kind("stderr")]
    assert "exited 3" in line and "flock busy" in line


def test_a_missing_exporter_is_reported() -> None:
    missing = ExecResult("", "spawn mempalace-pi-session ENOENT", 1)  # pi's code for it
    feeder, host, _, client, _ = make(results=[missing])
    assert run(feeder.shutdown()) is Outcome.PREPARE_FAILED
    assert client.calls == [] and len(host.of_kind("stderr")) == 1


def test_a_refused_mine_loses_nothing_the_next_trigger_retries() -> None:
    refusals = iter([PalaceToolError(-32001, "Peer MCP writer active", {"failure_kind":
                                                                        "peer_contention"})])

    def mine(args: dict) -> Any:
        error = next(refusals, None)
        if error is not None:
            raise error
        return {"success": True}

    client = FakeClient(handlers={"mempalace_mine": mine})
    feeder, host, scripted, client, clock = make(client=client)

    async def scenario() -> None:
        assert await settle(feeder) is Outcome.MINE_REFUSED
        clock.advance(1)  # well inside the 10-minute window
        assert await settle(feeder) is Outcome.MINED  # re-exported and mined again
        clock.advance(1)
        assert feeder.settled() is None  # now the window applies

    run(scenario())
    assert len(scripted.calls) == 2 and len(client.called("mempalace_mine")) == 2
    [line] = [e["line"] for e in host.of_kind("stderr")]
    assert "-32001" in line


def test_a_refused_mine_at_shutdown_is_reported() -> None:
    def refuse(args: dict) -> Any:
        raise PalaceToolError(-32001, "Peer MCP writer active")

    feeder, host, _, _, _ = make(client=FakeClient(handlers={"mempalace_mine": refuse}))
    assert run(feeder.shutdown()) is Outcome.MINE_REFUSED
    assert len(host.of_kind("stderr")) == 1


def test_a_mine_that_times_out_is_reported() -> None:
    def stall(args: dict) -> Any:
        raise PalaceTimeout("tools/call", 30000)

    feeder, host, _, _, _ = make(client=FakeClient(handlers={"mempalace_mine": stall}))
    assert run(feeder.shutdown()) is Outcome.MINE_FAILED
    assert "timed out" in host.of_kind("stderr")[0]["line"]


def test_the_mine_cap_holds_even_if_the_client_ignores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feeding, "MINE_GUARD_S", 0.05)
    feeder, host, _, client, _ = make(FeedSettings(mine_timeout_ms=50))

    async def scenario() -> Outcome | None:
        client.gates["mempalace_mine"] = asyncio.Event()  # never set: a stalled palace
        return await feeder.shutdown()

    assert run(scenario()) is Outcome.MINE_FAILED
    assert "no answer in 50 ms" in host.of_kind("stderr")[0]["line"]


def test_a_mine_result_that_did_not_file_is_a_failure() -> None:
    client = FakeClient(handlers={"mempalace_mine": lambda a: {"success": False,
                                                                "error": "Source not found"}})
    feeder, host, _, _, _ = make(client=client)
    assert run(feeder.shutdown()) is Outcome.MINE_FAILED
    assert "Source not found" in host.of_kind("stderr")[0]["line"]


def test_an_is_error_mine_result_is_a_failure() -> None:
    client = FakeClient(handlers={"mempalace_mine": lambda a: result("boom", is_error=True)})
    feeder, _, _, _, _ = make(client=client)
    assert run(feeder.shutdown()) is Outcome.MINE_FAILED


def test_remote_without_ssh_target_skips_with_one_stderr_line() -> None:
    feeder, host, scripted, client, clock = make(FeedSettings(remote=True))

    async def scenario() -> None:
        assert feeder.settled() is None
        clock.advance(10**9)
        assert feeder.settled() is None
        assert await feeder.shutdown() is None

    run(scenario())
    assert scripted.calls == [] and client.calls == []
    [line] = [e["line"] for e in host.of_kind("stderr")]
    assert "MEMPALACE_PI_SSH_TARGET" in line


def test_remote_with_ssh_target_feeds() -> None:
    feeder, _, scripted, client, _ = make(FeedSettings(remote=True, ssh_target="palace@host"))
    assert run(feeder.shutdown()) is Outcome.MINED
    assert len(scripted.calls) == 1 and len(client.calls) == 1


def test_the_feeds_own_mine_is_stamped() -> None:
    feeder, _, _, client, _ = make(device="tor-ms22")
    run(feeder.shutdown())
    assert client.called("mempalace_mine") == [{"source": "/staged/export-1.jsonl",
                                                "wing": "wing_conversations",
                                                "agent": "pi@tor-ms22"}]


@pytest.mark.parametrize(("stdout", "expected"), [
    ("MINE_SOURCE=/a/b.jsonl\n", "/a/b.jsonl"),
    ("staging 3 sessions\nMINE_SOURCE=/a/b c.jsonl  \n", "/a/b c.jsonl"),
    ("  MINE_SOURCE=/first\nMINE_SOURCE=/second\n", "/second"),
    ("", None),
    ("MINE_SOURCE=\n", None),
    ("nothing worth feeding\n", None),
    ("SOME_MINE_SOURCE=/x\n", None),
])
def test_mine_source_parsing(stdout: str, expected: str | None) -> None:
    assert mine_source(stdout) == expected
