"""Loopback ports and readiness for the HTTP servers the kit starts itself (the real mempalace,
the fake, for fidelity, the official suite and ``run --server real``): one way to pick a port
and one way to wait for ``/healthz``, so every caller has the same deadline behaviour."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable

import httpx

HEALTH_POLL_S = 0.1


def free_port() -> int:
    """A port nothing listens on now on 127.0.0.1 (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_healthy(port: int, deadline_s: float, alive: Callable[[], bool]) -> bool:
    """Poll ``GET http://127.0.0.1:PORT/healthz`` until it answers 200 (True), the server is no
    longer ``alive()`` or ``deadline_s`` passes (False). The Host header is the bound address
    with its port, which mempalace 3.11 pins."""
    end = time.monotonic() + deadline_s
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while time.monotonic() < end and alive():
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    return True
            time.sleep(HEALTH_POLL_S)
    return False
