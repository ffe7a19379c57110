"""Issue 13: what a host writes cannot take the runner's memory or disk without bound. A stdout
line longer than the cap is a protocol violation (the host is killed, the line never held whole);
the stderr copy in the run's directory keeps its head and tail and says how much it dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from palace_conformance.runner.execution import driver
from palace_conformance.runner.execution.driver import (
    PROTOCOL_VIOLATION,
    DriverClient,
    DriverFailure,
)

from .scripted_host import FLOOD_LINES, LONG_LINE_BYTES
from .support import scripted

CAP = 1024 * 1024


def test_an_over_long_stdout_line_is_a_protocol_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "MAX_LINE_BYTES", CAP)
    assert LONG_LINE_BYTES > CAP
    with DriverClient(scripted("longline:load"), grace_ms=200).start() as host:
        host.hello()
        with pytest.raises(DriverFailure) as caught:
            host.request("load", {"env": {}}, deadline_ms=20_000)
        message = str(caught.value)
        assert caught.value.kind == PROTOCOL_VIOLATION and caught.value.op == "load"
        assert message.startswith(f"host sent an over-long line (more than {CAP} bytes without "
                                  "a newline) on stdout during 'load': b'xxx")
        assert len(message) < 300 and "\n" not in message
        assert host.proc is not None and host.proc.poll() is not None  # killed


def test_the_stderr_copy_keeps_head_and_tail_and_counts_what_it_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    head, tail = 64 * 1024, driver.STDERR_KEEP
    monkeypatch.setattr(driver, "STDERR_FILE_HEAD", head)
    copy = tmp_path / "host.stderr"
    with DriverClient(scripted("stderrflood:load"), stderr_path=copy, grace_ms=200) as host:
        host.hello()
        assert host.request("load", {"env": {}}, deadline_ms=20_000).ok
    total = FLOOD_LINES * len("stderr line 000000\n")
    kept = copy.read_bytes()
    assert kept.startswith(b"stderr line 000000\n")
    assert kept.endswith(f"stderr line {FLOOD_LINES - 1:06d}\n".encode())
    dropped = total - head - tail
    marker = (f"[palace-conformance: {dropped} bytes of the host's stderr dropped here; the "
              f"first {head} and the last {tail} are kept]").encode()
    assert marker in kept
    assert len(kept) == head + tail + len(marker) + 2  # the marker stands on a line of its own


def test_a_short_stderr_is_copied_whole(tmp_path: Path) -> None:
    copy = tmp_path / "host.stderr"
    with DriverClient(scripted("crash:load"), stderr_path=copy, grace_ms=200) as host:
        host.hello()
        with pytest.raises(DriverFailure):
            host.request("load", {"env": {}}, deadline_ms=5000)
    assert copy.read_bytes() == b"scripted host: crashing on load\n"
