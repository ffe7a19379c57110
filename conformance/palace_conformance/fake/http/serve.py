"""``palace-conformance fake http`` as a process: start-up faults, the writer lease, the listening
socket, the ready file, signals, and stopping when the owner is gone."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import tempfile
from pathlib import Path

from palace_conformance.fake.brain import Brain
from palace_conformance.fake.http.server import LOOPBACK_HOSTS, FakeHttpServer, log
from palace_conformance.fake.options import (
    SYNC_INTERVAL_ENV,
    TOKEN_ENV,
    WATCH_ENV,
    WRITER_WAIT_ENV,
    FakeOptions,
    build_brain,
)
from palace_conformance.fake.playback import flood_stderr, pause, write_stderr
from palace_conformance.fake.startup import startup_faults

_SECRET_IN_SPEC = re.compile(r"(token=)[^,]*")


def _redacted_argv(argv: list[str]) -> list[str]:
    """argv for the journal: the ``--token`` value and any ``token=`` in a fault spec hidden."""
    out: list[str] = []
    for index, arg in enumerate(argv):
        previous = argv[index - 1] if index else ""
        if previous == "--token":
            out.append("<redacted>")
        elif arg.startswith("--token="):
            out.append("--token=<redacted>")
        else:
            out.append(_SECRET_IN_SPEC.sub(r"\1<redacted>", arg))
    return out


async def _startup(brain: Brain) -> tuple[int | None, bool]:
    """Obey ``$startup`` faults: (exit code if start-up must fail, whether SIGTERM is ignored)."""
    start = startup_faults(brain.start_process(_redacted_argv(sys.argv)))
    if start.fail_code is not None:
        await pause(start.fail_after_ms)
        if start.fail_stderr:
            log(start.fail_stderr)
        return start.record_failure(brain), False
    for size, invalid_utf8 in start.flood_bytes:
        flood_stderr(size, invalid_utf8)
    for pieces, pause_ms in start.stderr_pieces:
        write_stderr(pieces, pause_ms)
    await pause(start.delay_ms)
    return None, start.ignore_sigterm


async def _take_lease(brain: Brain) -> bool:
    """A writable mempalace HTTP server holds the writer lease from start-up on."""
    try:
        wait = max(0.0, float(os.environ.get(WRITER_WAIT_ENV, "0")))
    except ValueError:
        wait = 0.0
    contention = brain.lease.acquire()
    if contention is not None and wait > 0:
        log(f"Writable MCP HTTP startup is waiting up to {wait:g} s for the writer lease: "
            f"{contention.reason}")
        clock = asyncio.get_running_loop().time
        deadline = clock() + wait
        backoff = 0.5
        while contention is not None and clock() < deadline:
            await asyncio.sleep(min(backoff, deadline - clock()))
            backoff = min(backoff * 2, 5.0)
            contention = brain.lease.acquire()
    if contention is not None:
        log(f"Writable MCP HTTP startup refused: {contention.reason}")
        brain.journal.record("lease", event="contended", palace=brain.lease.palace,
                             holder=contention.holder)
        brain.journal.record("process_exit", code=2, reason="writer lease held elsewhere")
        return False
    brain.journal.record("lease", event="acquired", palace=brain.lease.palace)
    return True


def _peer_sync_interval() -> float:
    """``MEMPALACE_SYNC_INTERVAL`` as 3.11 reads it: seconds, 15 when unset or not a number,
    0 (or less) for no peer sync thread."""
    try:
        return float(os.environ.get(SYNC_INTERVAL_ENV, "") or 15)
    except ValueError:
        return 15.0


def _write_ready_file(path: str, url: str, port: int) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ready-", dir=target.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": url, "port": port, "pid": os.getpid()}, handle)
    os.replace(tmp, target)


def _watch_owner(reason: list[str], stopped: asyncio.Event) -> asyncio.Task[None] | None:
    """Stop when the process named by ``PALACE_FAKE_WATCH_PID`` is gone.

    A runner that is killed outright cannot clean up; without this its HTTP fakes would linger.
    """
    raw = os.environ.get(WATCH_ENV, "")
    if not raw.isdigit():
        return None
    owner = int(raw)

    async def watch() -> None:
        while True:
            await asyncio.sleep(0.5)
            try:
                os.kill(owner, 0)
            except ProcessLookupError:
                reason.append("owner gone")
                stopped.set()
                return
            except PermissionError:
                continue

    return asyncio.get_running_loop().create_task(watch())


async def _serve(brain: Brain, *, host: str, port: int, token: str | None, sessions: bool,
                 ready_file: str | None, control: bool, preset: str | None = None) -> int:
    log("MemPalace MCP HTTP server starting...")
    failed, ignore_sigterm = await _startup(brain)
    if failed is not None:
        return failed
    if not await _take_lease(brain):
        return 2
    server = FakeHttpServer(brain, host=host, token=token, sessions=sessions, control=control)
    try:
        await server.start(port)
    except OSError as exc:
        log(f"palace-conformance fake http: cannot listen on {host}:{port}: {exc.strerror}; "
            "pick another --port (0 picks a free one)")
        brain.lease.release()
        return 2
    interval = _peer_sync_interval()
    if interval > 0:  # the fake has no peers to sync; this is the line 3.11 prints on start-up
        log(f"peer sync thread started (interval {interval:.0f}s)")
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    reason: list[str] = []

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if ignore_sigterm and signum == signal.SIGTERM:
            brain.journal.record("signal", signal=name, action="ignored")
            return
        brain.journal.record("signal", signal=name, action="exit")
        reason.append(name)
        stopped.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, on_signal, signum)
    log(f"MemPalace MCP HTTP server listening on {server.url}")
    if preset:  # someone reproducing a fault by hand: say how to point a harness here
        log(f"preset {preset}: start your harness with MEMPALACE_REMOTE_URL={server.url}"
            + (" MEMPALACE_REMOTE_TOKEN=<the --token>" if token else ""))
    if ready_file:  # last: whoever waits for it may read every start-up line at once
        try:
            _write_ready_file(ready_file, server.url, server.port)
        except OSError as exc:
            log(f"palace-conformance fake http: cannot write --ready-file {ready_file}: "
                f"{exc.strerror}; pick a writable path")
            brain.lease.release()
            return 2
    watcher = _watch_owner(reason, stopped)
    await stopped.wait()
    if watcher is not None:
        watcher.cancel()
    await server.close()
    brain.journal.record("process_exit", code=0, reason=reason[0] if reason else "stopped")
    brain.lease.release()
    return 0


def run_http(options: FakeOptions, *, host: str, port: int, token: str | None, sessions: bool,
             ready_file: str | None, control: bool) -> int:
    """Serve the fake over HTTP until SIGTERM; returns the process exit code."""
    if host.lower() not in LOOPBACK_HOSTS:
        print(f"palace-conformance fake http: refusing to bind non-loopback host {host!r}; "
              "use 127.0.0.1, localhost or ::1", file=sys.stderr)
        return 2
    if token is None or token == "":
        token = os.environ.get(TOKEN_ENV) or None
    brain = build_brain(options, "http")
    if options.preset:  # build_brain has checked the name
        from palace_conformance.fake.presets import find_preset

        sessions = sessions or find_preset(options.preset).sessions
    try:
        return asyncio.run(_serve(brain, host=host, port=port, token=token, sessions=sessions,
                                  ready_file=ready_file, control=control, preset=options.preset))
    except KeyboardInterrupt:
        return 0
