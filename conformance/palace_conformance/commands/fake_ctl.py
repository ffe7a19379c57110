"""``palace-conformance fake ctl``: steer a running HTTP fake through its control API.

A person reproducing a fault by hand arms it in the middle of a session (the harness keeps its
connection), forgets sessions or swaps the token without writing curl bodies. Faults are typed in
the compact syntax or as a preset name and checked here first, so a typo is one line before any
request is sent; the fake's own refusal (HTTP 400) is shown as its one line too.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from palace_conformance.commands.declare import SubCommands, declare, declare_group
from palace_conformance.commands.usage import Handler
from palace_conformance.errors import PalaceError
from palace_conformance.fake.faults import FakeSetupError, parse_compact

PROG = "palace-conformance fake ctl"
TIMEOUT_S = 10.0


class CtlError(PalaceError):
    """A control call that failed; the message is the one line to print."""


def base_url(args: argparse.Namespace) -> str:
    """``http://HOST:PORT`` of the fake, from ``--url`` (any URL on it, e.g. its /mcp) or a
    ``--ready-file`` (waited for up to ``--wait`` seconds)."""
    if getattr(args, "ready_file", None):  # ``fake journal --url`` has no --ready-file
        ready = Path(args.ready_file)
        deadline = time.monotonic() + args.wait
        while not ready.exists():
            if time.monotonic() > deadline:
                raise CtlError(f"{ready} did not appear within {args.wait:g} s; is "
                               "'palace-conformance fake http --ready-file' running?")
            time.sleep(0.05)
        try:
            url = str(json.loads(ready.read_text(encoding="utf-8"))["url"])
        except (OSError, ValueError, KeyError, TypeError):
            raise CtlError(f"{ready} is not a fake http ready file") from None
    else:
        url = args.url
    import httpx  # here, not at module level: the parser is built for every command

    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise CtlError(f"--url {url!r} is not an http URL; give the fake's URL, e.g. "
                       "http://127.0.0.1:8765/mcp")
    return f"{parsed.scheme}://{parsed.netloc.decode()}"


#: the most of an answer read (the journal of a long session is the big one)
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class _Answer:
    """What the request thread got: status, body, or the error to raise."""

    def __init__(self) -> None:
        self.status = 0
        self.body = b""
        self.error: CtlError | None = None
        self.done = threading.Event()
        self.cancelled = threading.Event()


def _fetch(answer: _Answer, base: str, method: str, path: str, content: bytes | None,
           max_bytes: int, timeout_s: float) -> None:
    """The request, in its own thread: streamed, stopped at ``max_bytes`` or when cancelled."""
    import httpx

    try:
        with httpx.stream(method, f"{base}{path}", content=content, timeout=timeout_s,
                          headers={"Content-Type": "application/json"}) as response:
            answer.status = response.status_code
            chunks: list[bytes] = []
            total = 0
            for chunk in response.iter_bytes():
                if answer.cancelled.is_set():
                    return
                total += len(chunk)
                if total > max_bytes:
                    answer.error = CtlError(f"the fake at {base} answered {method} {path} with "
                                            f"more than {max_bytes} bytes; stopped reading")
                    return
                chunks.append(chunk)
            answer.body = b"".join(chunks)
    except httpx.TimeoutException:
        answer.error = CtlError(f"the fake at {base} did not answer within {timeout_s:g} s")
    except (httpx.TransportError, httpx.DecodingError) as exc:
        answer.error = CtlError(f"cannot reach a fake at {base} ({type(exc).__name__}: "
                                f"{' '.join((str(exc) or 'no detail').split())[:200]}); is "
                                "'palace-conformance fake http' running there?")
    except Exception as exc:
        answer.error = CtlError(f"the fake at {base} broke {method} {path} "
                                f"({type(exc).__name__}: {str(exc)[:200]})")
    finally:
        answer.done.set()


def call(base: str, method: str, path: str, body: Any = None, *,
         deadline: float | None = None, max_bytes: int = MAX_ANSWER_BYTES) -> Any:
    """One control request; any failure is a :class:`CtlError` with one line. The whole
    exchange (headers and body, however slowly the peer sends them) ends by ``deadline`` (a
    ``time.monotonic()``; default :data:`TIMEOUT_S` from now), the answer is at most
    ``max_bytes``, and Ctrl-C is seen at once (the request runs in a thread of its own)."""
    content = None if body is None else json.dumps(body).encode()
    end = time.monotonic() + TIMEOUT_S if deadline is None else deadline
    left = max(end - time.monotonic(), 0.01)
    answer = _Answer()
    worker = threading.Thread(target=_fetch, args=(answer, base, method, path, content,
                                                   max_bytes, left), daemon=True)
    worker.start()
    try:
        finished = answer.done.wait(left)
    finally:
        answer.cancelled.set()  # a Ctrl-C or a deadline: the thread stops at its next chunk
    if not finished:
        raise CtlError(f"the fake at {base} did not finish answering {method} {path} within "
                       f"{left:.3g} s; stopped waiting")
    if answer.error is not None:
        raise answer.error
    try:
        data = json.loads(answer.body)
    except ValueError:
        data = None
    except RecursionError:
        raise CtlError(f"the fake at {base} answered JSON nested too deeply") from None
    text = answer.body[:400].decode("utf-8", "replace")
    if answer.status != 200 and path.startswith("/_fake/") and not isinstance(data, dict):
        raise CtlError(f"{base} has no control API (HTTP {answer.status}; started with "
                       "--no-control, or not the fake)")
    if answer.status != 200:
        reason = data.get("error") if isinstance(data, dict) else text
        reason = " ".join(str(reason).split())[:200]
        raise CtlError(f"the fake refused {method} {path} ({answer.status}): {reason}")
    return data


def _faults(args: argparse.Namespace) -> list[dict[str, Any]]:
    faults: list[dict[str, Any]] = []
    if args.preset:
        from palace_conformance.fake.presets import find_preset

        preset = find_preset(args.preset)
        preset.require_server_faults()
        faults += [f.to_json() for f in preset.parsed("http")]
    for index, spec in enumerate(args.spec):
        fault = parse_compact(spec.strip(), index).to_json()
        fault.pop("id")  # the fake names it (ctl-N-ACTION), so repeated injects never clash
        faults.append(fault)
    if not faults:
        raise CtlError("inject needs a fault SPEC (see 'palace-conformance fake faults') or "
                       "--preset NAME")
    return faults


def _status(base: str) -> str:
    """One line: alive, what the journal says about requests, faults fired, sessions."""
    records = call(base, "GET", "/_fake/journal")
    if not isinstance(records, list):
        raise CtlError(f"{base}/_fake/journal did not answer a JSON list")
    kinds = [r.get("kind") for r in records if isinstance(r, dict)]
    fired = [r for r in records if isinstance(r, dict) and r.get("kind") == "fault"]
    opened = sum(1 for r in records if r.get("kind") == "session" and r.get("event") == "opened")
    gone = sum(1 for r in records if r.get("kind") == "session" and r.get("event") != "opened")
    pids = sorted({r.get("pid") for r in records if r.get("kind") == "process_start"})
    last = f", last: {fired[-1].get('action')} ({fired[-1].get('fault_id')})" if fired else ""
    return (f"fake at {base} is up (pid {', '.join(map(str, pids)) or '?'}): "
            f"{kinds.count('recv')} MCP message(s), {len(fired)} fault(s) fired{last}, "
            f"{max(opened - gone, 0)} live session(s)")


def _action(act: Callable[[argparse.Namespace, str], int]) -> Handler:
    """A ``ctl`` action as a command's handler: the fake's base URL found first (``--url`` or
    ``--ready-file``); a failed control call is one line on stderr, exit 1."""

    @functools.wraps(act)
    def handler(args: argparse.Namespace) -> int:
        try:
            return act(args, base_url(args))
        except CtlError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 1

    return handler


@_action
def _inject(args: argparse.Namespace, base: str) -> int:
    """Arm fault(s) now, in the compact syntax (see 'palace-conformance fake faults') or a
    preset's; they count requests from now on. A fault that does not parse is one line before
    any request is sent, exit 2."""
    try:
        faults = _faults(args)
    except FakeSetupError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    armed = call(base, "POST", "/_fake/faults", faults)
    print(f"armed {', '.join(armed.get('armed', []))}")
    return 0


@_action
def _clear(args: argparse.Namespace, base: str) -> int:
    """Disarm every fault; the token is not a fault and stays as it is (rotate-token)."""
    cleared = call(base, "DELETE", "/_fake/faults").get("cleared", 0)
    print(f"cleared {cleared} fault(s); the token is not a fault and stays as it is "
          "(rotate-token TOKEN or --none changes it)")
    return 0


@_action
def _forget(args: argparse.Namespace, base: str) -> int:
    """Forget every session (or only --id ID): the next request on it gets 404."""
    body = {"id": args.id} if args.id else None
    forgotten = call(base, "POST", "/_fake/sessions/forget", body).get("forgotten", [])
    print(f"forgot {len(forgotten)} session(s)")
    return 0


@_action
def _rotate(args: argparse.Namespace, base: str) -> int:
    """Replace the bearer token the fake requires with TOKEN, or with --none require none."""
    token = None if args.no_token else args.token
    if token is None and not args.no_token:
        print(f"{PROG}: rotate-token needs TOKEN or --none", file=sys.stderr)
        return 2
    auth = call(base, "POST", "/_fake/token", {"token": token}).get("auth")
    print("token replaced" if auth else "token removed: no auth")
    return 0


@_action
def _url(args: argparse.Namespace, base: str) -> int:
    """Print the fake's MCP URL (for MEMPALACE_REMOTE_URL), once it answers /healthz."""
    call(base, "GET", "/healthz")
    print(f"{base}/mcp")
    return 0


@_action
def _status_line(args: argparse.Namespace, base: str) -> int:
    """One line: up, MCP messages seen, faults fired (the last one named), live sessions."""
    call(base, "GET", "/healthz")
    print(_status(base))
    return 0


def add_ctl(sub: SubCommands) -> None:
    ctl, verbs = declare_group(sub, "ctl", "steer a running fake http: inject, clear, "
                               "forget-sessions, rotate-token, status, url",
                               "Steer a running HTTP fake through its control API "
                               "(docs/fake-control-api.md): arm faults in the middle of a "
                               "session, forget sessions, swap the token.", "ctl_command",
                               "ACTION")
    where = ctl.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="the fake's URL (its /mcp URL will do)")
    where.add_argument("--ready-file", metavar="FILE", help="the fake's --ready-file (waited for)")
    ctl.add_argument("--wait", type=float, default=10.0, metavar="S",
                     help="how long to wait for --ready-file to appear (default 10)")
    inject = declare(verbs, "inject", "arm fault(s) now; they count requests from now on",
                     _inject)
    inject.add_argument("spec", metavar="SPEC", nargs="*", help="compact fault spec(s)")
    inject.add_argument("--preset", metavar="NAME", help="arm a preset's faults")
    declare(verbs, "clear", "disarm every fault (the token is separate: rotate-token)", _clear)
    forget = declare(verbs, "forget-sessions", "forget every session (or --id ID): the next "
                     "request on it gets 404", _forget)
    forget.add_argument("--id", help="only this session")
    rotate = declare(verbs, "rotate-token", "replace the bearer token (--none: no auth)",
                     _rotate)
    rotate.add_argument("token", metavar="TOKEN", nargs="?")
    rotate.add_argument("--none", dest="no_token", action="store_true")
    declare(verbs, "status", "one line: up, messages seen, faults fired, live sessions",
            _status_line)
    declare(verbs, "url", "print the fake's MCP URL (for MEMPALACE_REMOTE_URL)", _url)
