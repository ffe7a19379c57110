"""Deadlines over a fake clock: per-request and handshake budgets, 0 = disabled (STDIO-04)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palace_bridge.clock import FakeClock
from palace_bridge.deadlines import MESSAGE_MAX_MS, MESSAGE_MIN_MS, Deadline, TimeoutPolicy


def test_deadline_counts_down_and_expires_exactly_at_the_timeout():
    clock = FakeClock(1000)
    deadline = Deadline.start(clock, 300)
    assert deadline.remaining_ms() == 300
    clock.advance(299)
    assert not deadline.expired()
    assert deadline.remaining_ms() == 1
    clock.advance(1)
    assert deadline.expired()
    assert deadline.remaining_ms() == 0
    clock.advance(5000)
    assert deadline.remaining_ms() == 0, "never negative"
    assert deadline.remaining_s() == 0


def test_zero_disables_the_deadline():
    clock = FakeClock()
    deadline = Deadline.start(clock, 0)
    clock.advance(10**9)
    assert not deadline.enabled
    assert not deadline.expired()
    assert deadline.remaining_ms() is None and deadline.remaining_s() is None


def test_policy_picks_request_or_handshake_budget_and_honours_overrides():
    clock = FakeClock()
    policy = TimeoutPolicy(request_timeout_ms=60000, init_timeout_ms=300000)
    assert policy.for_request(clock).timeout_ms == 60000
    assert policy.for_handshake(clock).timeout_ms == 300000
    assert policy.for_request(clock, 250).timeout_ms == 250
    assert not policy.for_request(clock, 0).enabled
    assert not TimeoutPolicy(0, 0).for_handshake(clock).enabled


def test_one_handshake_budget_covers_initialize_and_every_tools_list_page():
    clock = FakeClock()
    handshake = TimeoutPolicy(60000, 1000).for_handshake(clock)
    clock.advance(600)  # initialize took 600 ms
    assert handshake.remaining_ms() == 400  # tools/list gets what is left, not a fresh budget
    clock.advance(400)
    assert handshake.expired()


def test_negative_timeout_is_rejected():
    with pytest.raises(ValueError):
        Deadline.start(FakeClock(), -1)


def test_fake_clock_cannot_go_back():
    with pytest.raises(ValueError):
        FakeClock().advance(-1)


@settings(max_examples=300, deadline=None)
@given(timeout=st.integers(0, 10**7), steps=st.lists(st.integers(0, 10**6), max_size=20))
def test_remaining_is_timeout_minus_elapsed(timeout, steps):
    clock = FakeClock(12345)
    deadline = Deadline.start(clock, timeout)
    for step in steps:
        clock.advance(step)
        elapsed = clock.now_ms() - 12345
        if timeout == 0:
            assert deadline.remaining_ms() is None and not deadline.expired()
        else:
            assert deadline.remaining_ms() == max(0, timeout - elapsed)
            assert deadline.expired() == (elapsed >= timeout)
        assert deadline.elapsed_ms() == elapsed


@pytest.mark.parametrize(("request_ms", "expected_ms"), [
    (0, MESSAGE_MAX_MS),          # timeouts disabled: a message nobody waits on is still bounded
    (300, MESSAGE_MIN_MS),        # a tight request budget: a cancel notice still gets a fair chance
    (3000, 3000),
    (600_000, MESSAGE_MAX_MS),
])
def test_a_message_nobody_waits_on_always_has_a_finite_deadline(request_ms, expected_ms):
    clock = FakeClock()
    deadline = TimeoutPolicy(request_ms, 0).for_message(clock)
    assert deadline.enabled and deadline.timeout_ms == expected_ms
    clock.advance(expected_ms)
    assert deadline.expired()
