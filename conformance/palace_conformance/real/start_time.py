"""The real server's start, measured at the beginning of a ``run --server real`` (its own slack).

A bound of a scenario that includes a palace start (a step during which the bridge started its
child, a journal gap across a child's start, the bridge's stdio init budget) was written for the
fake, which answers ``initialize`` as soon as its interpreter runs. A real ``mempalace-mcp``
forked by the run's zygote (``relay/zygote.py``) still imports mempalace itself before it
answers (1 s and more on a loaded machine), on top of everything the fake's start costs. So the
run measures that figure on this machine, now: :func:`measure` starts the real server the way a
relay does (a zygote spawn, else cold), sends ``initialize`` and times the answer, a few times;
the median is the allowance the judge adds to those bounds (``RealServerSetup.palace_start_ms``)
and the report shows it with its samples and the load they were taken at. The fake's bounds
never move: its allowance is 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import statistics
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from palace_conformance.real import install
from palace_conformance.relay import zygote

SAMPLES = 3
#: how long one start may take before the sample counts as that long (a loaded machine)
SAMPLE_LIMIT_S = 60.0
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "palace-conformance-start-time", "version": "1"}}}


@dataclass(frozen=True)
class StartFigure:
    """The measured start: the allowance (the samples' median, whole ms), each sample and the
    load average when they were taken; ``how``: through the zygote, or cold."""

    ms: int
    samples: tuple[int, ...]
    load: str
    how: str

    def to_json(self) -> dict[str, Any]:
        return {"ms": self.ms, "samples": list(self.samples), "load": self.load, "how": self.how}

    def describe(self) -> str:
        shown = ", ".join(f"{s:,}" for s in self.samples)
        return (f"the real server's start, measured {self.how}: {self.ms:,} ms (median of "
                f"{shown} ms; load average {self.load})")


class StartTracker:
    """The figure as the run goes on: the load changes during a run (15 to 55 in one of 20
    minutes here), so every finished real-server world reports how long its bridges'
    ``initialize`` waited on a real server (the relay's ``server_start`` records), and the
    figure is the larger of the run's first measure and the median of the latest
    :data:`RECENT` such waits. Used for what must be fixed before a run starts (the bridge's
    init budget); a step or gap across a start also gets the wait its own journal shows."""

    RECENT = 9

    def __init__(self, first: StartFigure) -> None:
        self.first = first
        self._recent: list[int] = []
        self._lock = threading.Lock()

    def observe(self, waits: Iterable[int]) -> None:
        with self._lock:
            self._recent = [*self._recent, *waits][-self.RECENT:]

    @property
    def ms(self) -> int:
        with self._lock:
            recent = round(statistics.median(self._recent)) if self._recent else 0
        return max(self.first.ms, recent)

    def describe(self) -> str:
        with self._lock:
            count = len(self._recent)
        now = self.ms
        if not count or now == self.first.ms:
            return self.first.describe()
        return (f"{self.first.describe()}, now {now:,} ms (median of the last {count} starts "
                f"the relays saw)")


def load_average() -> str:
    """The 1-minute load average, as /proc/loadavg says it ('?' elsewhere)."""
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return handle.read().split()[0]
    except (OSError, IndexError):
        return "?"


def measure(server: install.RealServer, env: Mapping[str, str], zygote_path: str | None,
            samples: int = SAMPLES) -> StartFigure:
    """Start the real stdio server ``samples`` times as a relay would and time each
    ``initialize`` answer; the median is the figure."""
    load = load_average()
    config = {"command": server.stdio_command(), zygote.CONFIG_KEY: zygote_path}
    taken = [_sample(config, env) for _ in range(samples)]
    how = "through the pre-started server" if zygote_path else "cold"
    return StartFigure(ms=round(statistics.median(taken)), samples=tuple(taken), load=load,
                       how=how)


def _sample(config: Mapping[str, Any], env: Mapping[str, str]) -> int:
    began = time.monotonic()
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        forked = zygote.spawn(config, env, stdin=True, stdout=True, stderr=devnull)
    finally:
        os.close(devnull)
    proc: zygote.ZygoteProcess | subprocess.Popen[bytes]
    if forked is not None:
        proc = forked
    else:
        proc = subprocess.Popen([str(part) for part in config["command"]], env=dict(env),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        _answer(proc.stdout, began + SAMPLE_LIMIT_S)
        return round((time.monotonic() - began) * 1000)
    finally:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(10)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _answer(stdout: IO[bytes], deadline: float) -> None:
    """Read until the server answers ``initialize`` (id 1), ends, or the deadline passes."""
    fd = stdout.fileno()
    pending = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, _, pending = pending.partition(b"\n")
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict) and message.get("id") == 1:
                    return
