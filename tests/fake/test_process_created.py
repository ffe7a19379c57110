"""``process_start`` carries ``created_t``: when the process was created, so a gap to it is the
bridge's spawn and not the fake's interpreter start (which takes a second or more under load).

The kernel counts a start in clock ticks, truncated: ``created_t`` is the end of that tick, the
latest the process can have been created, so a lower bound never fails because of the tick."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from palace_conformance.fake import journal as journal_module
from palace_conformance.fake.journal import process_created, start_fields

from .stdio_harness import FakeProcess

linux = pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/stat is Linux's")


def _stat(ticks: int, comm: str = "python3") -> str:
    """A /proc/self/stat line whose field 22 (starttime) is ``ticks``."""
    return f"4242 ({comm}) S 1 4242 4242 0 -1 4194560 {' '.join(['0'] * 12)} {ticks} 1 2 3\n"


@linux
def test_the_start_tick_is_converted_to_the_journal_clock_rounded_up() -> None:
    hertz = os.sysconf("SC_CLK_TCK")
    boot, mono = time.clock_gettime(time.CLOCK_BOOTTIME), time.monotonic()
    ticks = int((boot - 1.0) * hertz)  # a process created about a second ago
    created = process_created(_stat(ticks))
    assert created is not None
    expected = mono - (boot - (ticks + 1) / hertz)  # the end of the tick, on the monotonic clock
    assert expected - 0.001 <= created <= expected + 0.05
    # a command name with spaces and parentheses does not shift the fields
    assert process_created(_stat(ticks, comm="a) b (c")) == pytest.approx(created, abs=0.05)


@linux
def test_never_later_than_now() -> None:
    far = int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")) + 10_000
    before = time.monotonic()
    created = process_created(_stat(far))
    assert created is not None and before <= created <= time.monotonic()


@linux
def test_this_process_was_created_before_now() -> None:
    created = process_created()
    assert created is not None and created <= time.monotonic()
    assert set(start_fields()) == {"created_t"}


def test_unknown_where_the_system_does_not_say(monkeypatch: pytest.MonkeyPatch) -> None:
    assert process_created("garbage") is None
    assert process_created("1 (x) S 2 3") is None  # too few fields
    monkeypatch.setattr(journal_module.sys, "platform", "darwin")
    assert process_created(_stat(100)) is None
    assert start_fields() == {}  # no created_t: the judge measures to the record's t


@linux
def test_the_fakes_process_start_carries_its_creation(tmp_path: Path) -> None:
    """Between the spawn (after the test's clock reading) and the record (after the interpreter
    started): the creation rounded up to its tick can be neither earlier nor later."""
    journal = tmp_path / "journal.jsonl"
    with FakeProcess(tmp_path, journal=journal) as fake:
        fake.ping()
        [start] = fake.records("process_start")
    assert fake.started <= start["created_t"] <= start["t"]
