"""``palace-conformance fake ...``: serve the fake, install shims, hold a palace lock."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any, NoReturn

from palace_conformance.fake.faults import COMPACT_HELP, FakeSetupError
from palace_conformance.fake.journal import Journal
from palace_conformance.fake.lease import Contention, Lease, default_palace_path, holder_message
from palace_conformance.fake.options import ENV_ARGV0, ENV_JOURNAL, ENV_STATE, FakeOptions
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
    from palace_conformance.fake.cli import run_stdio

    prog = "palace-conformance fake stdio"
    try:
        _served_preset(args.preset)
    except FakeSetupError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    return run_stdio(_options(args), prog=prog)


def _http(args: argparse.Namespace) -> int:
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
    from palace_conformance.fake.presets import presets_table

    print(presets_table())
    return 0


def _hold_lock(args: argparse.Namespace) -> int:
    palace = os.path.abspath(args.palace) if args.palace else default_palace_path()
    lease = Lease(palace)
    contention = lease.acquire()
    if contention is not None:
        print(f"mempalace: {_contention_text(contention)}", file=sys.stderr)
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


def _contention_text(contention: Contention) -> str:
    """mempalace's CLI wording: the holder message, or why the lock could not be set up."""
    if contention.kind == "peer_contention":
        return holder_message(contention.palace, contention.holder)
    return contention.reason


def run_cli_mine(source: str | None, palace: str, journal_path: str | None,
                 state: str | None, argv: Sequence[str]) -> int:
    """``mempalace mine SOURCE`` as the fake sees it: exit 1 with mempalace's holder message
    while another writer holds the palace; otherwise mine into the fake palace and exit 0.

    Every run is journaled (``kind: cli_run``), so a bridge that shells out to the ``mempalace``
    CLI instead of using MCP is visible to the fixture."""
    try:
        journal = Journal(journal_path, "cli")
    except OSError as exc:
        print(f"mempalace (fake): cannot open journal {journal_path}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    run = {"command": "mine", "argv": list(argv), "palace": palace, "source": source}
    lease = Lease(palace)
    contention = lease.acquire()
    if contention is not None:
        text = f"mempalace: {_contention_text(contention)}"
        journal.record("cli_run", **run, exit_code=1, stderr=text)
        print(text, file=sys.stderr)
        return 1
    try:
        from palace_conformance.fake.palace import PalaceStore, mine_source

        if source is None:
            result = {"success": False, "error": "mine needs a source directory"}
        else:
            store = PalaceStore(state)
            with store.transaction(write=True) as contents:
                result = mine_source(contents, {"source": source})
    except (OSError, ValueError) as exc:
        result = {"success": False, "error": f"cannot use palace state {state}: {exc}"}
    finally:
        lease.release()
    if not result.get("success"):
        text = f"mempalace: {result.get('error')}"
        journal.record("cli_run", **run, exit_code=1, stderr=text)
        print(text, file=sys.stderr)
        return 1
    journal.record("cli_run", **run, exit_code=0, result=result)
    print(f"Mined {result['files_processed']} file(s) from {result['source']} into wing "
          f"{result['wing']}: {result['drawers_filed']} new drawer(s) (palace-conformance fake)")
    return 0


def _cli_mine(args: argparse.Namespace) -> int:
    palace = os.path.abspath(args.palace) if args.palace else default_palace_path()
    return run_cli_mine(args.source, palace, args.journal or os.environ.get(ENV_JOURNAL),
                        args.state or os.environ.get(ENV_STATE),
                        ["palace-conformance", "fake", "cli-mine", *sys.argv[3:]])


class _CliUsage(Exception):
    pass


class _CliParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like any usage mistake here
        raise _CliUsage(message)


#: what ``mempalace --version`` prints (3.11.0's argparse ``version`` action: prog and version)
CLI_VERSION = "mempalace 3.11.0"
#: the read commands the fake CLI answers from the palace: command -> the tool whose result it
#: prints (as JSON, one object; the real CLI's human wording is not modelled)
CLI_READS = {"status": "mempalace_status", "search": "mempalace_search"}


def _cli_read(command: str, rest: Sequence[str], palace: str, state: str | None) -> dict[str, Any]:
    """``status``, ``search QUERY`` and ``wake-up`` from the fake palace (the same state the
    scenario's servers share): the result of the tool each stands for."""
    from palace_conformance.fake.palace import PalaceStore, run_tool

    store = PalaceStore(state)
    if command == "search":
        words = [word for word in rest if not word.startswith("-")]
        return run_tool(store, "mempalace_search", {"query": " ".join(words)}, palace)
    if command == "wake-up":
        return {"status": run_tool(store, "mempalace_status", {}, palace),
                "diary": run_tool(store, "mempalace_diary_read", {"agent_name": "agent"}, palace)}
    return run_tool(store, CLI_READS[command], {}, palace)


def mempalace_cli_main(argv: Sequence[str] | None = None, argv0: str | None = None) -> None:
    """The fake ``mempalace`` CLI: ``--version`` as 3.11.0 answers it, ``mine`` as mempalace's
    under contention, and the common reads (``status``, ``search QUERY``, ``wake-up``) answered
    from the fake palace; any other subcommand is journaled and refused, as not modelled. Every
    run is journaled (``cli_run``). ``argv0`` is how it was invoked, as journaled
    (``PALACE_FAKE_ARGV0`` wins, for a wrapper that knows better)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    argv0 = os.environ.pop(ENV_ARGV0, "") or argv0 or "mempalace"
    parser = _CliParser(prog="mempalace", add_help=False)
    parser.add_argument("--palace")
    parser.add_argument("--version", action="store_true")
    parser.add_argument("command", nargs="?")
    parser.add_argument("source", nargs="?")
    try:
        args, rest = parser.parse_known_args(argv)
    except _CliUsage as exc:
        print(f"mempalace (fake): {exc}", file=sys.stderr)
        sys.exit(2)
    palace = os.path.abspath(args.palace) if args.palace else default_palace_path()
    journal_path = os.environ.get(ENV_JOURNAL)

    def journal(command: str | None, exit_code: int) -> None:
        with contextlib.suppress(OSError):
            Journal(journal_path, "cli").record("cli_run", command=command,
                                                argv=[argv0, *argv], palace=palace,
                                                exit_code=exit_code)

    if args.version:
        journal("--version", 0)
        print(CLI_VERSION)
        sys.exit(0)
    if args.command in (*CLI_READS, "wake-up"):
        rest = [args.source, *rest] if args.source is not None else list(rest)
        try:
            result = _cli_read(args.command, rest, palace, os.environ.get(ENV_STATE))
        except (OSError, ValueError) as exc:
            journal(args.command, 1)
            print(f"mempalace: cannot read the palace: {exc}", file=sys.stderr)
            sys.exit(1)
        journal(args.command, 0)
        print(json.dumps(result, ensure_ascii=False))
        sys.exit(0)
    if args.command != "mine":
        journal(args.command, 2)
        print(f"mempalace (fake): {args.command or 'no command'!s} is not modelled by the "
              "palace-conformance fake; only --version, mine, status, search and wake-up are",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(run_cli_mine(args.source, palace, journal_path, os.environ.get(ENV_STATE),
                          [argv0, *argv]))


def _catalog(args: argparse.Namespace) -> int:
    from palace_conformance.fake.truth_table import TruthTableError, run_catalog
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
    print(COMPACT_HELP)
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fake = sub.add_parser("fake", help="run the fake MemPalace server and its helpers",
                          description="The fake MemPalace server (behaves like mempalace 3.11.0 "
                          "until a fault plan says otherwise).")
    fake_sub = fake.add_subparsers(dest="fake_command", metavar="SUBCOMMAND",
                                   parser_class=type(fake))
    fake_sub.required = True

    stdio = fake_sub.add_parser("stdio", help="serve MCP over stdin/stdout",
                                epilog=COMPACT_HELP,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(stdio)
    stdio.set_defaults(handler=_stdio)

    http = fake_sub.add_parser("http", help="serve MCP over HTTP on loopback",
                               epilog=COMPACT_HELP,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
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
    http.set_defaults(handler=_http)

    shim = fake_sub.add_parser("install-shim", help="write DIR/mempalace-mcp, "
                               "DIR/mempalace-light-mcp and DIR/mempalace (the fake), "
                               "DIR/mempalace-pi-session (a scriptable stand-in) and the fake "
                               "mempalace Python package (PYTHONPATH=DIR/.palace/lib/python*/"
                               "site-packages)")
    shim.add_argument("dir", metavar="DIR")
    shim.add_argument("--preset", metavar="NAME", help="bake a fault preset into the server "
                      "shims (PALACE_FAKE_PRESET in the environment still wins)")
    shim.set_defaults(handler=_install_shim)

    unshim = fake_sub.add_parser("uninstall-shim", help="remove exactly what install-shim "
                                 "placed in DIR (a shim changed since is kept, and said)")
    unshim.add_argument("dir", metavar="DIR")
    unshim.set_defaults(handler=_uninstall_shim)

    hold = fake_sub.add_parser("hold-lock", help="hold the palace writer lock like another writer")
    hold.add_argument("--palace", metavar="DIR")
    hold.add_argument("--seconds", type=float, default=0,
                      help="release after this long (0: until killed)")
    hold.set_defaults(handler=_hold_lock)

    mine = fake_sub.add_parser("cli-mine", help="act like 'mempalace mine DIR': exit 1 with "
                               "mempalace's holder message while another writer holds the palace")
    mine.add_argument("source", metavar="DIR", nargs="?", help="directory (or file) to mine")
    mine.add_argument("--palace", metavar="DIR")
    mine.add_argument("--journal", metavar="FILE", help="journal the run here "
                      "(env PALACE_FAKE_JOURNAL)")
    mine.add_argument("--state", metavar="FILE", help="palace contents file "
                      "(env PALACE_FAKE_STATE)")
    mine.set_defaults(handler=_cli_mine)

    faults = fake_sub.add_parser("faults", help="print the compact fault syntax")
    faults.set_defaults(handler=_faults_help)

    presets = fake_sub.add_parser("presets", help="list the named fault presets (for --preset), "
                                  "one line each: name, transports, what the harness sees")
    presets.set_defaults(handler=_presets)

    catalog = fake_sub.add_parser(
        "catalog", help="record the real mempalace's catalogue and its answers to fixed probe "
        "calls (--from-real), or check the fake against the recorded answers")
    catalog.add_argument("--from-real", action="store_true", help="start the real server (an "
                         "isolated world, offline embeddings) and record it: writes the fake's "
                         "catalogue and truth table under fixtures/catalogue/")
    catalog.add_argument("--real-python", metavar="PY", help="a Python with mempalace installed "
                         "(default: $PALACE_REAL_PYTHON)")
    catalog.add_argument("--check", action="store_true", help="write nothing: exit 1 with the "
                         "differences when the recording differs from the checked-in data")
    catalog.set_defaults(handler=_catalog)

    from palace_conformance.fake.ctl import add_ctl
    from palace_conformance.fake.journal_view import add_journal

    add_ctl(fake_sub)
    add_journal(fake_sub)


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

