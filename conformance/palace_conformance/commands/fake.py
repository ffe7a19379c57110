"""``palace-conformance fake ...``: serve the fake, install shims, hold a palace lock."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

from palace_conformance.commands.declare import SubCommands, declare, declare_group
from palace_conformance.commands.options import add_real_python
from palace_conformance.fake.faults import COMPACT_HELP, FakeSetupError
from palace_conformance.fake.lease import Lease, default_palace_path
from palace_conformance.fake.mempalace_cli import contention_text, run_cli_mine
from palace_conformance.fake.options import ENV_JOURNAL, ENV_STATE, FakeOptions
from palace_conformance.fake.shims import install_shim
from palace_conformance.resources import CATALOGUES


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plan", metavar="FILE", help="fault plan JSON (env PALACE_FAKE_PLAN)")
    parser.add_argument("--fault", metavar="SPEC", action="append", default=[],
                        help="add one fault in compact syntax; repeatable (env PALACE_FAKE_FAULT, "
                        "';'-separated). See 'palace-conformance fake faults'.")
    parser.add_argument("--journal", metavar="FILE", help="append the wire journal here "
                        "(env PALACE_FAKE_JOURNAL); default: the newest 10000 records in memory")
    parser.add_argument("--state", metavar="FILE", help="palace contents, shared by every process "
                        "of a scenario (env PALACE_FAKE_STATE); default: in memory")
    parser.add_argument("--palace", metavar="DIR", help="palace path used for the writer lock and "
                        "messages (default: as mempalace 3.11 resolves it: $MEMPALACE_PALACE_PATH, "
                        "else ~/.config/mempalace/palace unless ~/.mempalace is a legacy install)")
    parser.add_argument("--catalogue", choices=tuple(CATALOGUES), help="which server to be: "
                        "full (mempalace-mcp, the default) or light (mempalace-light-mcp) "
                        "(env PALACE_FAKE_CATALOGUE)")
    parser.add_argument("--preset", metavar="NAME", help="a named fault preset, applied before "
                        "--plan and --fault (env PALACE_FAKE_PRESET); see "
                        "'palace-conformance fake presets'")


def _options(args: argparse.Namespace) -> FakeOptions:
    return FakeOptions(plan=args.plan, faults=list(args.fault), journal=args.journal,
                       state=args.state, palace=args.palace, catalogue=args.catalogue,
                       preset=args.preset)


def _served_preset(name: str | None) -> None:
    """A preset named on a serving command's line must change what that server does: a
    stand-in-only one (``wedged-prepare``) is refused, naming ``install-shim``. (Through
    ``PALACE_FAKE_PRESET`` a server serves it cleanly: the same variable reaches the stand-in.)"""
    if name:
        from palace_conformance.fake.presets import find_preset

        find_preset(name).require_server_faults()


def _stdio(args: argparse.Namespace) -> int:
    """Serve MCP over stdin/stdout as mempalace-mcp would, faults from the plan, the compact
    --fault specs and a preset (or their environment variables)."""
    from palace_conformance.fake.cli import run_stdio

    prog = "palace-conformance fake stdio"
    try:
        _served_preset(args.preset)
    except FakeSetupError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    return run_stdio(_options(args), prog=prog)


def _http(args: argparse.Namespace) -> int:
    """Serve MCP over HTTP on a loopback port as mempalace's HTTP server would, with the /_fake
    control API (fake ctl) unless --no-control; faults as for stdio."""
    from palace_conformance.fake.http.serve import run_http

    try:
        _served_preset(args.preset)
        return run_http(_options(args).merged(FakeOptions.from_env()), host=args.host,
                        port=args.port, token=args.token, sessions=args.sessions,
                        ready_file=args.ready_file, control=not args.no_control)
    except FakeSetupError as exc:
        print(f"palace-conformance fake http: {exc}", file=sys.stderr)
        return 2


def _install_shim(args: argparse.Namespace) -> int:
    """Write launchers that stand in for mempalace's own in DIR: DIR/mempalace-mcp,
    DIR/mempalace-light-mcp and DIR/mempalace (the fake), DIR/mempalace-pi-session (a
    scriptable stand-in) and the fake mempalace Python package; put DIR first on PATH."""
    prog = "palace-conformance fake install-shim"
    if args.preset:
        from palace_conformance.fake.presets import find_preset

        try:
            preset = find_preset(args.preset)
        except FakeSetupError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        if "stdio" not in preset.transports:  # a shim serves stdio
            print(f"{prog}: preset {preset.name!r} fires only over HTTP and a shim serves stdio; "
                  f"run 'palace-conformance fake http --preset {preset.name}' and point the "
                  "harness at its URL", file=sys.stderr)
            return 2
    try:
        paths = install_shim(args.dir, python_package=True, preset=args.preset)
    except OSError as exc:
        print(f"{prog}: cannot write to {args.dir}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    if args.preset:  # ready to paste: the harness needs only PATH changed
        directory = shlex.quote(str(paths[0].parent))
        print(f"# preset {args.preset}: {preset.description}\n"
              "# start your harness from a shell where\n"
              f"export PATH={directory}:\"$PATH\"", file=sys.stderr)
    return 0


def _uninstall_shim(args: argparse.Namespace) -> int:
    """Remove exactly what install-shim placed in DIR; a shim changed since is kept, and
    said."""
    from palace_conformance.fake.shims import uninstall_shim

    prog = "palace-conformance fake uninstall-shim"
    try:
        removed, kept = uninstall_shim(args.dir)
    except FileNotFoundError as exc:
        print(f"{prog}: {exc}; nothing removed", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{prog}: cannot remove from {args.dir}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for path in removed:
        print(f"removed {path}")
    for path in kept:
        print(f"{prog}: kept {path}: it changed since install-shim wrote it", file=sys.stderr)
    return 0


def _presets(args: argparse.Namespace) -> int:
    """List the named fault presets (for --preset), one line each: name, transports, what the
    harness sees."""
    from palace_conformance.fake.presets import presets_table

    print(presets_table())
    return 0


def _hold_lock(args: argparse.Namespace) -> int:
    """Hold the palace's writer lock as another writer would, until killed or for --seconds."""
    palace = os.path.abspath(args.palace) if args.palace else default_palace_path()
    lease = Lease(palace)
    contention = lease.acquire()
    if contention is not None:
        print(f"mempalace: {contention_text(contention)}", file=sys.stderr)
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


def _cli_mine(args: argparse.Namespace) -> int:
    """Act like 'mempalace mine DIR': exit 1 with mempalace's holder message while another
    writer holds the palace."""
    palace = os.path.abspath(args.palace) if args.palace else default_palace_path()
    return run_cli_mine(args.source, palace, args.journal or os.environ.get(ENV_JOURNAL),
                        args.state or os.environ.get(ENV_STATE),
                        ["palace-conformance", "fake", "cli-mine", *sys.argv[3:]])


def _catalog(args: argparse.Namespace) -> int:
    """Record the real mempalace's catalogue and its answers to fixed probe calls
    (--from-real), or check the fake against the recorded answers (--check)."""
    from palace_conformance.fidelity.truth_table import TruthTableError, run_catalog
    from palace_conformance.real.install import RealServerMissing

    if args.real_python and not args.from_real:
        print("palace-conformance fake catalog: --real-python needs --from-real",
              file=sys.stderr)
        return 2
    if not args.from_real and not args.check:
        print("palace-conformance fake catalog: give --from-real (record the real server) "
              "or --check (check the fake against the recorded answers)", file=sys.stderr)
        return 2
    try:
        return run_catalog(args.from_real, args.real_python, args.check)
    except (RealServerMissing, TruthTableError) as exc:
        print(f"palace-conformance fake catalog: {exc}", file=sys.stderr)
        return 1


def _faults_help(args: argparse.Namespace) -> int:
    """Print the compact fault syntax (--fault, fake ctl inject)."""
    print(COMPACT_HELP)
    return 0


def add_commands(sub: SubCommands) -> None:
    _, fake_sub = declare_group(sub, "fake", "run the fake MemPalace server and its helpers",
                                "The fake MemPalace server (behaves like mempalace 3.11.0 "
                                "until a fault plan says otherwise).", "fake_command")

    _add_servers(fake_sub)
    _add_shims(fake_sub)
    _add_helpers(fake_sub)
    from palace_conformance.commands.fake_ctl import add_ctl
    from palace_conformance.commands.fake_journal import add_journal

    add_ctl(fake_sub)
    add_journal(fake_sub)


def _add_servers(fake_sub: SubCommands) -> None:
    """``fake stdio`` and ``fake http``."""
    stdio = declare(fake_sub, "stdio", "serve MCP over stdin/stdout", _stdio, epilog=COMPACT_HELP)
    _common(stdio)

    http = declare(fake_sub, "http", "serve MCP over HTTP on loopback", _http,
                   epilog=COMPACT_HELP)
    _common(http)
    http.add_argument("--host", default="127.0.0.1",
                      help="loopback address to bind (default 127.0.0.1)")
    http.add_argument("--port", type=_port, default=0,
                      help="port, 0-65535 (default 0: pick a free one)")
    http.add_argument("--token", help="require 'Authorization: Bearer TOKEN' "
                      "(env MEMPALACE_MCP_HTTP_TOKEN)")
    http.add_argument("--sessions", action="store_true",
                      help="stateful mode: issue Mcp-Session-Id, 400 without it, 404 for "
                      "unknown ones")
    http.add_argument("--ready-file", metavar="FILE",
                      help="write {\"url\", \"port\", \"pid\"} here once listening")
    http.add_argument("--no-control", action="store_true", help="disable the /_fake control API")


def _add_shims(fake_sub: SubCommands) -> None:
    """``fake install-shim`` and ``fake uninstall-shim``."""
    shim = declare(fake_sub, "install-shim", "write DIR/mempalace-mcp, DIR/mempalace-light-mcp "
                   "and DIR/mempalace (the fake), DIR/mempalace-pi-session (a scriptable "
                   "stand-in) and the fake mempalace Python package "
                   "(PYTHONPATH=DIR/.palace/lib/python*/site-packages)", _install_shim)
    shim.add_argument("dir", metavar="DIR")
    shim.add_argument("--preset", metavar="NAME", help="bake a fault preset into the server "
                      "shims (PALACE_FAKE_PRESET in the environment still wins)")

    unshim = declare(fake_sub, "uninstall-shim", "remove exactly what install-shim placed in "
                     "DIR (a shim changed since is kept, and said)", _uninstall_shim)
    unshim.add_argument("dir", metavar="DIR")


def _add_helpers(fake_sub: SubCommands) -> None:
    """``hold-lock``, ``cli-mine``, ``faults``, ``presets`` and ``catalog``."""
    hold = declare(fake_sub, "hold-lock", "hold the palace writer lock like another writer",
                   _hold_lock)
    hold.add_argument("--palace", metavar="DIR")
    hold.add_argument("--seconds", type=float, default=0,
                      help="release after this long (0: until killed)")

    mine = declare(fake_sub, "cli-mine", "act like 'mempalace mine DIR': exit 1 with "
                   "mempalace's holder message while another writer holds the palace", _cli_mine)
    mine.add_argument("source", metavar="DIR", nargs="?", help="directory (or file) to mine")
    mine.add_argument("--palace", metavar="DIR")
    mine.add_argument("--journal", metavar="FILE", help="journal the run here "
                      "(env PALACE_FAKE_JOURNAL)")
    mine.add_argument("--state", metavar="FILE", help="palace contents file "
                      "(env PALACE_FAKE_STATE)")

    declare(fake_sub, "faults", "print the compact fault syntax", _faults_help)
    declare(fake_sub, "presets", "list the named fault presets (for --preset), one line each: "
            "name, transports, what the harness sees", _presets)

    catalog = declare(fake_sub, "catalog", "record the real mempalace's catalogue and its "
                      "answers to fixed probe calls (--from-real), or check the fake against "
                      "the recorded answers", _catalog)
    catalog.add_argument("--from-real", action="store_true", help="start the real server (an "
                         "isolated world, offline embeddings) and record it: writes the fake's "
                         "catalogue and truth table under fixtures/catalogue/")
    add_real_python(catalog, "with --from-real")
    catalog.add_argument("--check", action="store_true", help="write nothing: exit 1 with the "
                         "differences when the recording differs from the checked-in data")


def _port(text: str) -> int:
    """A TCP port for argparse: a one-line error for 99999 or -1, never a traceback."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port: give 0-65535 (0 picks a free one)")
    return port

