"""``palace-conformance fake journal``: the wire journal as a person reads it, one line a record.

Each line: seconds since the first record, the process, the direction (``->`` bridge to palace,
``<-`` palace to bridge, ``!!`` a fault fired, ``..`` anything else), what it was about (method,
tool, HTTP status) and the JSON-RPC id. Secrets are hidden by :mod:`palace_conformance.redaction`,
the rules reports use: values of secret-looking keys, credentials in headers, and the values of
secret-looking variables in this environment (``MEMPALACE_REMOTE_TOKEN``, ...) or given with
``--secret``.

``--follow`` keeps reading (a file as it grows, or ``GET /_fake/journal`` of a running HTTP fake)
until ``--for`` seconds have passed, the HTTP fake has gone, or Ctrl-C (exit 130).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from palace_conformance.commands.declare import SubCommands, declare
from palace_conformance.redaction import REDACTED, Redactor, environment_secrets, name_looks_secret

PROG = "palace-conformance fake journal"
POLL_S = 0.2
FIRST_FETCH_S = 3.0  # what the first GET of a short --for still gets
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


def hide_secrets(value: Any, redactor: Redactor) -> Any:
    """``value`` with secret-looking keys' values and known secret values replaced."""
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and (name_looks_secret(k) or k.lower()
                                                        in _SECRET_HEADERS) and v else
                    hide_secrets(v, redactor)) for k, v in value.items()}
    if isinstance(value, list):
        return [hide_secrets(v, redactor) for v in value]
    return redactor.value(value)


def _direction(kind: str) -> str:
    return {"recv": "->", "http_request": "->", "send": "<-", "http_response": "<-",
            "fault": "!!"}.get(kind, "..")


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _about(record: dict[str, Any]) -> str:
    """What one record was about, in a few words."""
    kind = record.get("kind")
    raw_message = record.get("message")
    message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
    if kind == "fault":
        target = record.get("tool") or record.get("method")
        return (f"fault {record.get('action')} fired on {target} (#{record.get('occurrence')}, "
                f"{record.get('fault_id')})")
    if kind in ("recv", "send"):
        method = record.get("method") or message.get("method")
        tool = record.get("tool")
        if method:
            return f"{method} {tool}" if tool else str(method)
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            return f"error {error.get('code')} {_short(error.get('message', ''), 60)}"
        if "result" in message:
            return "result"
        if "raw" in record:
            return f"raw {_short(record['raw'], 60)}"
        return "message"
    if kind == "http_request":
        return f"HTTP {record.get('method')} {record.get('path')}"
    if kind == "http_response":
        return f"HTTP {record.get('status')}"
    if kind == "control":
        return f"control {record.get('method')} {record.get('path')} -> {record.get('status')}"
    if kind == "process_start":
        return f"process start {_short(' '.join(map(str, record.get('argv') or [])), 70)}"
    if kind == "process_exit":
        return f"process exit {record.get('code')} ({record.get('reason')})"
    details = {k: v for k, v in record.items() if k not in ("t", "pid", "transport", "kind")}
    return f"{kind} {_short(details)}" if details else str(kind)


def format_record(record: dict[str, Any], start: float, redactor: Redactor) -> str:
    """One readable line for one journal record (secrets hidden)."""
    record = hide_secrets(record, redactor)
    at = record.get("t")
    when = f"{at - start:+9.3f}s" if isinstance(at, (int, float)) else " " * 10
    raw_message = record.get("message")
    message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
    rpc_id = record.get("id", message.get("id"))
    shown_id = f"  id={json.dumps(rpc_id)}" if rpc_id is not None else ""
    return (f"{when}  pid {record.get('pid', '?'):<7} {record.get('transport', '?'):<5} "
            f"{_direction(str(record.get('kind')))} {_about(record)}{shown_id}")


def file_records(path: Path, follow: bool) -> Iterator[dict[str, Any] | None]:
    """Records of a journal file; following, ``None`` whenever nothing new has come yet."""
    offset, pending = 0, b""
    while True:
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
        except FileNotFoundError:
            chunk = b""
        offset += len(chunk)
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()  # a line still being written
        for raw in lines:
            if raw.strip():
                try:
                    yield json.loads(raw)
                except json.JSONDecodeError:
                    continue
        if not follow:
            return
        yield None


def url_records(base: str, follow: bool,
                fetch: Callable[[str, str, str], Any]) -> Iterator[dict[str, Any] | None]:
    """Records of a running HTTP fake's journal (``GET /_fake/journal``), new ones only."""
    seen = 0
    while True:
        records = fetch(base, "GET", "/_fake/journal")
        if not isinstance(records, list):
            return
        yield from records[seen:]
        seen = len(records)
        if not follow:
            return
        yield None


def show(records: Iterable[dict[str, Any] | None], redactor: Redactor, seconds: float | None,
         out: Callable[[str], None]) -> None:
    """Print each record as it comes; stop at the end, or after ``seconds`` when following."""
    deadline = None if seconds is None else time.monotonic() + seconds
    start: float | None = None
    for record in records:
        if record is None:  # caught up: the only place a follower waits
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(POLL_S)
            continue
        if start is None and isinstance(record.get("t"), (int, float)):
            start = float(record["t"])
        out(format_record(record, start or 0.0, redactor))


def run_journal(args: argparse.Namespace) -> int:
    """Show a fake's journal (a FILE it writes, or a running fake http's --url), one readable
    line per record, secrets hidden; --follow watches it live (Ctrl-C exits 130), a lost fake
    is one line."""
    redactor = Redactor([*args.secret, *environment_secrets()], shapes=True)
    seconds = args.seconds if args.follow else None

    def out(line: str) -> None:
        print(line, flush=True)

    try:
        if args.url:
            from palace_conformance.commands.fake_ctl import TIMEOUT_S, CtlError, base_url, call

            until: float | None = None
            fetched = 0

            def fetch(base: str, method: str, path: str) -> Any:
                """One GET, ending by --for's end too (the first one gets at least
                FIRST_FETCH_S, so a short --for still shows the journal so far): a peer that
                trickles cannot hold it."""
                nonlocal fetched
                now = time.monotonic()
                end = now + TIMEOUT_S
                if until is not None:
                    end = min(end, until if fetched else max(until, now + FIRST_FETCH_S))
                fetched += 1
                return call(base, method, path, deadline=end)

            try:
                base = base_url(args)
                until = None if seconds is None else time.monotonic() + seconds
                show(url_records(base, args.follow, fetch), redactor, seconds, out)
            except CtlError as exc:
                if until is not None and time.monotonic() >= until:
                    return 0  # --for ran out mid-answer: the follow ends as asked
                print(f"{PROG}: {exc}", file=sys.stderr)
                return 1
        else:
            path = Path(args.file)
            if not args.follow and not path.is_file():
                print(f"{PROG}: no journal file {path}; give the file passed as --journal or "
                      "PALACE_FAKE_JOURNAL", file=sys.stderr)
                return 2
            show(file_records(path, args.follow), redactor, seconds, out)
    except KeyboardInterrupt:
        return 130
    return 0


def add_journal(sub: SubCommands) -> None:
    view = declare(sub, "journal", "show a fake's journal, one readable line per record (secrets "
                   "hidden); --follow to watch it live", run_journal)
    where = view.add_mutually_exclusive_group(required=True)
    where.add_argument("file", metavar="FILE", nargs="?", help="a journal file (--journal, "
                       "PALACE_FAKE_JOURNAL)")
    where.add_argument("--url", help="a running fake http's URL (reads GET /_fake/journal)")
    view.add_argument("--follow", "-f", action="store_true",
                      help="keep showing new records until Ctrl-C (exit 130) or --for")
    view.add_argument("--for", dest="seconds", type=float, metavar="S",
                      help="with --follow: stop after this many seconds")
    view.add_argument("--secret", action="append", default=[], metavar="VALUE",
                      help="also hide this value (repeatable); secret-looking variables of "
                      "this environment are hidden already")

