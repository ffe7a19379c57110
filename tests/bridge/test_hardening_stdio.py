"""Issue 13, the reference bridge's local child under hostile conditions (real processes): a child
whose grandchild escaped its process group with ``setsid`` and holds its pipes.

Times are checked only as "does not hang": an upper bound with ten seconds of slack.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

import pytest

from palace_bridge.errors import PalaceTimeout

from .support import Scenario, alive, run

HANG_SLACK_S = 10.0
TEST_BOUND_S = 60.0  # past this the old bug is proven: fail instead of hanging pytest
GRANDCHILD_LIFE_S = 40  # longer than any bound the test accepts, shorter than pytest's timeout

#: which of the child's pipes the escaped grandchild keeps open
HOLDS = {
    "stderr": "</dev/null >/dev/null",
    "stdout and stderr": "</dev/null",
}


@pytest.fixture
def scenario(tmp_path):
    return Scenario(tmp_path)


@pytest.mark.parametrize("holds", sorted(HOLDS))
def test_a_setsid_grandchild_holding_a_pipe_delays_neither_the_next_call_nor_stop(
        scenario, holds):
    """Item 6: the first call stalls and times out; its child ignores SIGTERM, so it is still
    alive when SIGKILL goes out, and a grandchild that left the group with ``setsid`` holds the
    child's pipes. asyncio's ``Process.wait()`` waits for those pipes too: the kill must not.
    The next call must respawn and answer within its own deadline (plus slack), and stop() must
    not wait for the grandchild either."""
    real = scenario.bin / "mempalace-mcp-real"
    (scenario.bin / "mempalace-mcp").rename(real)
    marker = scenario.root / "grandchildren.pid"
    wrapper = scenario.bin / "mempalace-mcp"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"setsid sleep {GRANDCHILD_LIFE_S} {HOLDS[holds]} &\n"
        f"echo $! >> '{marker}'\n"
        f"exec '{real}' \"$@\"\n")
    wrapper.chmod(0o755)
    # the first status call only; the first child only
    scenario.faults = ["stall@mempalace_status", "ignore_sigterm@$startup"]
    client = scenario.client(MEMPALACE_MCP_TIMEOUT_MS="1000")

    async def main() -> tuple[float, float, bool]:
        assert await client.start()
        with pytest.raises(PalaceTimeout):
            await asyncio.wait_for(client.call_tool("mempalace_status", {}), TEST_BOUND_S)
        began = time.monotonic()
        result = await asyncio.wait_for(client.call_tool("mempalace_status", {}), TEST_BOUND_S)
        next_call_s = time.monotonic() - began
        began = time.monotonic()
        await asyncio.wait_for(client.stop(), TEST_BOUND_S)
        return next_call_s, time.monotonic() - began, result.is_error

    try:
        next_call_s, stop_s, is_error = run(main())
        grandchildren = [int(pid) for pid in marker.read_text().split()]
        still_holding = all(alive(pid) for pid in grandchildren)
    finally:
        for pid in marker.read_text().split() if marker.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert next_call_s < 1.0 + HANG_SLACK_S
    assert stop_s < HANG_SLACK_S
    assert not is_error
    assert len(scenario.pids()) == len(grandchildren) == 2, "the test drove a respawn"
    assert still_holding, "the escaped grandchildren held their pipes throughout"
