"""``palace-conformance fake ...``: serve the fake, install shims, hold a palace lock."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from pathlib import Path

from .faults import COMPACT_HELP, FaultPlanError
from .lease import Lease, default_palace_path
from .server import FakeOptions


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plan", metavar="FILE", help="fault plan JSON (env PALACE_FAKE_PLAN)")
    parser.add_argument("--fault", metavar="SPEC", action="append", default=[],
                        help="add one fault in compact syntax; repeatable (env PALACE_FAKE_FAULT, "
                        "';'-separated). See 'palace-conformance fake faults'.")
    parser.add_argument("--journal", metavar="FILE", help="append the wire journal here "
                        "(env PALACE_FAKE_JOURNAL)")
    parser.add_argument("--state", metavar="FILE", help="palace contents, shared by every process "
                        "of a scenario (env PALACE_FAKE_STATE); default: in memory")
    parser.add_argument("--palace", metavar="DIR", help="palace path used for the writer lock and "
                        "messages (default: $MEMPALACE_PALACE_PATH or ~/.mempalace/palace)")


def _options(args: argparse.Namespace) -> FakeOptions:
    return FakeOptions(plan=args.plan, faults=list(args.fault), journal=args.journal,
                       state=args.state, palace=args.palace)


def _stdio(args: argparse.Namespace) -> int:
    from .cli import run_stdio

    return run_stdio(_options(args))


def _http(args: argparse.Namespace) -> int:
    from .http import run_http

    try:
        return run_http(_options(args).merged(FakeOptions.from_env()), host=args.host,
                        port=args.port, token=args.token, sessions=args.sessions,
                        ready_file=args.ready_file, control=not args.no_control)
    except FaultPlanError as exc:
        print(f"palace-conformance fake http: {exc}", file=sys.stderr)
        return 2


SHIM_NAMES = ("mempalace-mcp",)


def install_shim(directory: str | os.PathLike[str], python: str | None = None) -> list[Path]:
    """Write executables into ``directory`` that run the fake, so ``PATH=DIR:$PATH`` picks it up."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    python = python or sys.executable
    written = []
    for name in SHIM_NAMES:
        path = target / name
        path.write_text(
            "#!/bin/sh\n"
            "# palace-conformance shim: the fake MemPalace server posing as mempalace-mcp\n"
            f"exec '{python}' -c 'from palace_conformance.fake.cli import fake_mcp_main; "
            "fake_mcp_main()' \"$@\"\n"
        )
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        written.append(path)
    return written


def _install_shim(args: argparse.Namespace) -> int:
    for path in install_shim(args.dir):
        print(path)
    return 0


def _hold_lock(args: argparse.Namespace) -> int:
    palace = os.path.abspath(args.palace) if args.palace else default_palace_path()
    lease = Lease(palace)
    contention = lease.acquire()
    if contention is not None:
        print(f"mempalace: {contention.reason.split(': ', 1)[1]}", file=sys.stderr)
        return 1
    print(f"holding {lease.path} as PID {os.getpid()}", flush=True)
    deadline = time.monotonic() + args.seconds if args.seconds else None
    try:
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.05)
    except KeyboardInterrupt:
        pass
    lease.release()
    return 0


def _faults_help(args: argparse.Namespace) -> int:
    print(COMPACT_HELP)
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    fake = sub.add_parser("fake", help="run the fake MemPalace server and its helpers",
                          description="The fake MemPalace server (behaves like mempalace 3.11.0 "
                          "until a fault plan says otherwise).")
    fake_sub = fake.add_subparsers(dest="fake_command", metavar="SUBCOMMAND",
                                   parser_class=type(fake))
    fake_sub.required = True

    stdio = fake_sub.add_parser("stdio", help="serve MCP over stdin/stdout",
                                epilog=COMPACT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(stdio)
    stdio.set_defaults(handler=_stdio)

    http = fake_sub.add_parser("http", help="serve MCP over HTTP on loopback",
                               epilog=COMPACT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(http)
    http.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    http.add_argument("--port", type=int, default=0, help="port (default 0: pick a free one)")
    http.add_argument("--token", help="require 'Authorization: Bearer TOKEN' (env MEMPALACE_MCP_HTTP_TOKEN)")
    http.add_argument("--sessions", action="store_true",
                      help="stateful mode: issue Mcp-Session-Id, 400 without it, 404 for unknown ones")
    http.add_argument("--ready-file", metavar="FILE",
                      help="write {\"url\", \"port\", \"pid\"} here once listening")
    http.add_argument("--no-control", action="store_true", help="disable the /_fake control API")
    http.set_defaults(handler=_http)

    shim = fake_sub.add_parser("install-shim", help="write DIR/mempalace-mcp that runs the fake")
    shim.add_argument("dir", metavar="DIR")
    shim.set_defaults(handler=_install_shim)

    hold = fake_sub.add_parser("hold-lock", help="hold the palace writer lock like another writer")
    hold.add_argument("--palace", metavar="DIR")
    hold.add_argument("--seconds", type=float, default=0, help="release after this long (0: until killed)")
    hold.set_defaults(handler=_hold_lock)

    faults = fake_sub.add_parser("faults", help="print the compact fault syntax")
    faults.set_defaults(handler=_faults_help)
