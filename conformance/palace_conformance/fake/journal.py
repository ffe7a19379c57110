"""The wire journal: one JSON object per line, appended by every fake process of a scenario.

Fixtures assert on this file, so it is the contract between the fake and any runner, whatever
language the bridge under test is written in. Several processes (a respawned stdio child, a lock
contender) may append to the same file; each record is written with a single ``O_APPEND`` write so
lines never interleave.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from itertools import islice

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any

REDACTED = "<redacted>"
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


def redact_headers(headers: list[tuple[str, str]] | dict[str, str]) -> dict[str, str]:
    """Lower-cased header map with credentials replaced, so a journal never holds a token."""
    items = headers.items() if isinstance(headers, dict) else headers
    out: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        if key in _SECRET_HEADERS:
            scheme = value.split(" ", 1)[0] if " " in value else ""
            out[key] = f"{scheme} {REDACTED}".strip()
        else:
            out[key] = value
    return out


#: the environment a palace child journals at start (``process_start`` ``env``): the bridge's
#: knobs it passed on and HOME; a value under a name with one of the words is redacted
KIT_ENV_PREFIXES = ("MEMPALACE_",)
_SECRET_ENV_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def kit_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` the kit cares about, sorted, credentials redacted."""
    return {key: REDACTED if any(w in key for w in _SECRET_ENV_WORDS) else value
            for key, value in sorted(env.items())
            if key.startswith(KIT_ENV_PREFIXES) or key == "HOME"}


def _encode(entry: dict[str, Any]) -> bytes:
    """One journal line. Lone surrogates are escaped; a value JSON cannot hold (nested too deep
    to serialise) is replaced by a note rather than crash the fake that is recording it."""
    try:
        return (json.dumps(entry, ensure_ascii=False, default=str) + "\n").encode()
    except UnicodeEncodeError:
        return (json.dumps(entry, default=str) + "\n").encode()
    except (ValueError, RecursionError) as exc:
        head = {k: v for k, v in entry.items() if k in ("t", "pid", "transport", "kind")}
        return (json.dumps({**head, "unrecordable": type(exc).__name__}) + "\n").encode()


#: records a journal without a file keeps (the newest); a fake that runs for long without
#: ``--journal`` would otherwise grow without bound
MEMORY_KEEP = 10_000
#: ... and at most this many bytes of them (encoded), the oldest dropped first; one record
#: bigger than MEMORY_RECORD_MAX_BYTES (a 10 MB request body) is kept as its outline
MEMORY_MAX_BYTES = 32 * 1024 * 1024
MEMORY_RECORD_MAX_BYTES = 256 * 1024
TAIL_CHUNK = 1024 * 1024  # bytes a JournalTail reads at a time


def encode_record(entry: dict[str, Any]) -> bytes:
    """One record as its journal line, without the newline."""
    return _encode(entry)[:-1]


#: the tightest of this many readings of the boot-to-monotonic offset is taken (a preempted
#: reading is wide; one of a few is almost always a few microseconds)
OFFSET_READINGS = 3


def _boot_offset() -> float:
    """The largest the journal's clock can read at a moment minus ``CLOCK_BOOTTIME`` then.

    ``BOOTTIME - MONOTONIC`` is constant while the machine runs (it is the time spent
    suspended), but the two clocks are read one after the other: ``mono1 <= monotonic(boot read)
    <= mono2``. Taking ``mono2`` errs late, as :func:`process_created` must."""
    if sys.platform != "linux":
        raise OSError("no CLOCK_BOOTTIME here")
    best: tuple[float, float] | None = None
    for _ in range(OFFSET_READINGS):
        before = time.monotonic()
        boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        after = time.monotonic()
        if best is None or after - before < best[0]:
            best = (after - before, after - boot)
    assert best is not None
    return best[1]


def process_created(stat_text: str | None = None) -> float | None:
    """When this process was created, on the journal's clock (seconds): the *latest* moment it
    can have been, or None where the system does not say (not Linux, no ``/proc``).

    Why: a gap to a process start is the bridge's spawn, and the fake journals ``process_start``
    only after its interpreter has started and imported its modules, a second or more on a
    loaded machine that is not the bridge's doing. The kernel counts a process's start
    (``/proc/self/stat`` field 22) in whole clock ticks since boot (``CLOCK_BOOTTIME``, usually
    10 ms), truncated, so the end of that tick is the latest the process can have started: a gap
    to it is never shorter than the true one and a lower bound never fails because of the
    resolution. Never later than now (``stat_text`` is for tests)."""
    if sys.platform != "linux":
        return None
    try:
        if stat_text is None:
            with open("/proc/self/stat", encoding="ascii", errors="replace") as stat:
                stat_text = stat.read()
        # field 2 (comm) is in parentheses and may hold anything: count from the last ')'
        ticks = int(stat_text.rsplit(")", 1)[1].split()[19])
        hertz = os.sysconf("SC_CLK_TCK")
        offset = _boot_offset()
    except (OSError, ValueError, IndexError):
        return None
    if hertz <= 0:
        return None
    return min((ticks + 1) / hertz + offset, time.monotonic())


def start_fields() -> dict[str, float]:
    """The optional fields of a ``process_start`` record: ``created_t`` where it is known."""
    created = process_created()  # to the microsecond, as ``t``, but up: still the latest
    return {} if created is None else {"created_t": math.ceil(created * 1e6) / 1e6}


class Journal:
    """Appends records to a JSON-lines file, or, when no path is given, keeps the newest
    ``memory_keep`` in memory and counts the rest as :attr:`dropped`."""

    def __init__(self, path: str | os.PathLike[str] | None, transport: str, *,
                 memory_keep: int = MEMORY_KEEP) -> None:
        self.path = os.fspath(path) if path else None
        self.transport = transport
        self.pid = os.getpid()
        self.memory: deque[dict[str, Any]] = deque()
        self.memory_keep = memory_keep
        self.memory_bytes = 0  # the encoded size of what :attr:`memory` holds
        self._sizes: deque[int] = deque()
        self.recorded = 0  # records ever put in memory: the first kept is number recorded - len
        self._lock = threading.RLock()
        self._fd: int | None = None
        if self.path is not None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def record(self, kind: str, **fields: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "t": round(time.monotonic(), 6),
            "pid": self.pid,
            "transport": self.transport,
            "kind": kind,
        }
        entry.update(fields)
        line = _encode(entry)
        with self._lock:
            if self._fd is not None:
                os.write(self._fd, line)
            else:
                kept, size = entry, len(line)
                if size > MEMORY_RECORD_MAX_BYTES:  # a 10 MB request body: its outline only
                    kept = {k: v for k, v in entry.items()
                            if isinstance(v, int | float | bool) or v is None
                            or (isinstance(v, str) and len(v) <= 200)}
                    kept["truncated_bytes"] = size
                    size = len(_encode(kept))
                self.memory.append(kept)
                self._sizes.append(size)
                self.memory_bytes += size
                self.recorded += 1
                while len(self.memory) > 1 and (len(self.memory) > self.memory_keep
                                                or self.memory_bytes > MEMORY_MAX_BYTES):
                    self.memory.popleft()
                    self.memory_bytes -= self._sizes.popleft()
        return entry

    @property
    def dropped(self) -> int:
        """Records a memory journal no longer holds (always 0 with a file)."""
        return self.recorded - len(self.memory)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Serialise read-count-append across processes sharing this journal."""
        with self._lock:
            if self._fd is None:
                yield
                return
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read_journal(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All complete records of a journal file; a torn last line (a killed writer) is skipped."""
    records: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return records
    for raw in data.splitlines():
        if not raw.strip():
            continue
        try:
            records.append(json.loads(raw))
        except json.JSONDecodeError:
            continue
    return records


class JournalTail:
    """Incrementally reads records other processes appended, for cross-process occurrence counts."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.offset = 0
        self._pending = b""

    def skip_to_end(self) -> None:
        """Treat everything journaled so far as read (a watcher that only wants what follows)."""
        if self.journal.path is None:
            with self.journal._lock:
                self.offset = self.journal.recorded
            return
        try:
            self.offset = os.path.getsize(self.journal.path)
        except FileNotFoundError:
            self.offset = 0
        self._pending = b""

    def new_records(self) -> Iterator[dict[str, Any]]:
        """The records appended since the last call, read :data:`TAIL_CHUNK` bytes at a time
        (a long journal the fake was started on is never held whole). A generator: nothing is
        read until it is iterated, so skipping what is there is :meth:`skip_to_end`."""
        if self.journal.path is None:
            journal = self.journal
            with journal._lock:
                first = journal.recorded - len(journal.memory)  # the number of memory[0]
                records = list(islice(journal.memory, max(self.offset - first, 0), None))
                self.offset = journal.recorded
            yield from records
            return
        try:
            handle = open(self.journal.path, "rb")  # noqa: SIM115  # closed below
        except FileNotFoundError:
            return
        with handle:
            handle.seek(self.offset)
            while chunk := handle.read(TAIL_CHUNK):
                self.offset += len(chunk)
                lines = (self._pending + chunk).split(b"\n")
                self._pending = lines.pop()
                for raw in lines:
                    if raw.strip():
                        try:
                            yield json.loads(raw)
                        except (ValueError, RecursionError):
                            continue
