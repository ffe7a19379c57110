"""Capped exponential backoff, shared by the respawn budget and the connect retries."""

from __future__ import annotations


def exponential_delay_ms(base_ms: int, attempt: int, cap_ms: int | None = None) -> int:
    """Delay before the ``attempt``-th retry (1-based): ``base``, ``2*base``, ``4*base``, ..."""
    if attempt < 1:
        raise ValueError("attempts are numbered from 1")
    delay = base_ms * (1 << (attempt - 1))
    return delay if cap_ms is None else min(delay, cap_ms)
