"""The respawn budget as a state machine: backoff 1x/2x/4x, reset, latch, MAX_RESPAWNS=0."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palace_bridge.respawn import ChildState, Refuse, RespawnPolicy, Spawn, UseCurrent


def fail_start(policy: RespawnPolicy) -> None:
    policy.on_start_failed("exit 1 at startup")


def test_first_start_is_immediate_and_not_counted():
    policy = RespawnPolicy(max_respawns=2, backoff_ms=1000)
    assert policy.want_child() == Spawn(attempt=0, delay_ms=0)
    policy.on_ready()
    assert policy.want_child() == UseCurrent()
    assert policy.used == 0


def test_backoff_doubles_per_attempt_then_latches():
    policy = RespawnPolicy(max_respawns=3, backoff_ms=1000)
    delays = []
    decision = policy.want_child()
    while isinstance(decision, Spawn):
        delays.append(decision.delay_ms)
        fail_start(policy)
        decision = policy.want_child()
    assert delays == [0, 1000, 2000, 4000]  # first start, then 1x, 2x, 4x
    assert isinstance(decision, Refuse)
    assert "respawn budget spent (3 attempt(s))" in decision.why
    assert "exit 1 at startup" in decision.why
    assert policy.latched


def test_latch_is_permanent():
    policy = RespawnPolicy(max_respawns=1, backoff_ms=10)
    policy.want_child()
    fail_start(policy)
    policy.want_child()
    fail_start(policy)
    assert isinstance(policy.want_child(), Refuse)
    policy.on_success()
    policy.on_ready()
    policy.on_death("again")
    for _ in range(5):
        assert isinstance(policy.want_child(), Refuse)
    assert policy.state is ChildState.LATCHED


def test_budget_resets_when_a_respawned_child_answers():
    policy = RespawnPolicy(max_respawns=2, backoff_ms=100)
    policy.want_child()
    policy.on_ready()
    policy.on_death("crash")
    assert policy.want_child() == Spawn(1, 100)
    fail_start(policy)
    assert policy.want_child() == Spawn(2, 200)
    policy.on_ready()  # the handshake answered: proof of life
    assert policy.used == 0
    policy.on_death("crash again")
    assert policy.want_child() == Spawn(1, 100), "full patience again after a success"


def test_max_respawns_zero_is_the_fail_fast_latch():
    policy = RespawnPolicy(max_respawns=0, backoff_ms=1000)
    assert policy.want_child() == Spawn(0, 0)
    policy.on_ready()
    policy.on_death("stall-kill")
    decision = policy.want_child()
    assert isinstance(decision, Refuse)
    assert "MEMPALACE_MCP_MAX_RESPAWNS=0" in decision.why


def test_max_respawns_zero_first_start_failure_is_final():
    policy = RespawnPolicy(max_respawns=0, backoff_ms=1000)
    policy.want_child()
    fail_start(policy)
    assert isinstance(policy.want_child(), Refuse)


def test_unspawnable_latches_at_once():
    policy = RespawnPolicy(max_respawns=5, backoff_ms=10)
    policy.want_child()
    policy.on_unspawnable("mempalace-mcp not found on PATH")
    decision = policy.want_child()
    assert decision == Refuse("mempalace-mcp not found on PATH")


def test_stop_refuses_everything():
    policy = RespawnPolicy(max_respawns=5, backoff_ms=10)
    policy.want_child()
    policy.on_ready()
    policy.on_stop()
    policy.on_death("late")
    assert isinstance(policy.want_child(), Refuse)
    policy.on_unspawnable("x")
    assert policy.state is ChildState.STOPPED


def test_a_result_mid_handshake_does_not_reset_the_budget():
    """A child that answers initialize, then dies in tools/list, must not respawn forever."""
    policy = RespawnPolicy(max_respawns=2, backoff_ms=10)
    spawns = 0
    decision = policy.want_child()
    while isinstance(decision, Spawn):
        spawns += 1
        policy.on_success()  # initialize answered
        fail_start(policy)   # ... then tools/list crashed
        decision = policy.want_child()
        assert spawns < 10
    assert spawns == 3 and policy.latched


def test_concurrent_start_is_a_programming_error():
    policy = RespawnPolicy(max_respawns=2, backoff_ms=10)
    policy.want_child()
    with pytest.raises(RuntimeError):
        policy.want_child()


def test_negative_knobs_are_rejected():
    with pytest.raises(ValueError):
        RespawnPolicy(-1, 10)


EVENTS = st.sampled_from(["want", "ready", "fail", "death", "success"])


@settings(max_examples=250, deadline=None)
@given(max_respawns=st.integers(0, 5), backoff=st.integers(0, 5000),
       events=st.lists(EVENTS, max_size=60))
def test_invariants_over_random_event_sequences(max_respawns, backoff, events):
    policy = RespawnPolicy(max_respawns, backoff)
    consecutive_failed_spawns = 0
    latched_seen = False
    for event in events:
        if event == "want":
            if policy.state is ChildState.STARTING:
                continue
            decision = policy.want_child()
            if latched_seen:
                assert isinstance(decision, Refuse), "a latch never lets go"
            if isinstance(decision, Spawn):
                if decision.attempt == 0:
                    assert decision.delay_ms == 0
                else:
                    assert 1 <= decision.attempt <= max_respawns
                    assert decision.delay_ms == backoff * 2 ** (decision.attempt - 1)
            if isinstance(decision, Refuse):
                latched_seen = True
        elif event == "ready":
            if policy.state is ChildState.STARTING:
                consecutive_failed_spawns = 0
            policy.on_ready()
        elif event == "fail":
            if policy.state is ChildState.STARTING:
                consecutive_failed_spawns += 1
            policy.on_start_failed("x")
        elif event == "death":
            policy.on_death("x")
        else:
            policy.on_success()
        # never more failed starts in a row than the first start plus the budget
        assert consecutive_failed_spawns <= max_respawns + 1
        assert 0 <= policy.used <= max_respawns


def test_timeline_of_a_stall_then_respawns_on_a_fake_clock():
    """The host's view, composed from the policy pieces on a clock that never sleeps."""
    from palace_bridge.clock import FakeClock
    from palace_bridge.deadlines import TimeoutPolicy

    clock = FakeClock()
    policy = RespawnPolicy(max_respawns=2, backoff_ms=1000)
    timeouts = TimeoutPolicy(request_timeout_ms=60000, init_timeout_ms=300000)
    policy.want_child()
    handshake = timeouts.for_handshake(clock)
    clock.advance(1500)  # a cold open inside the generous init budget
    assert not handshake.expired()
    policy.on_ready()

    call = timeouts.for_request(clock)
    clock.advance(call.remaining_ms())  # the palace wedges: the call waits out its timeout
    assert call.expired() and clock.now_ms() == 61500
    policy.on_death("stalled past 60000 ms")

    spawn = policy.want_child()  # the next call
    assert spawn == Spawn(1, 1000)
    clock.advance(spawn.delay_ms)
    handshake = timeouts.for_handshake(clock)
    clock.advance(300000)  # the respawned child never answers initialize
    assert handshake.expired()
    policy.on_start_failed("initialize stalled past 300000 ms")
    spawn = policy.want_child()
    assert spawn == Spawn(2, 2000)
    clock.advance(spawn.delay_ms)
    policy.on_start_failed("exit 1")
    assert isinstance(policy.want_child(), Refuse)
    assert clock.now_ms() == 61500 + 1000 + 300000 + 2000
