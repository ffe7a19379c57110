"""The fake ``mempalace`` CLI: ``--version`` as 3.11.0 answers it, ``mempalace mine`` as
mempalace 3.11 behaves under writer contention, and the common reads (``status``, ``search``,
``wake-up``) from the fake palace, every run journaled; any other subcommand refused. Installed
as ``DIR/mempalace`` by ``install-shim`` and reached through the fake ``mempalace`` Python
package and the stand-ins."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence

from palace_conformance.errors import UserError
from palace_conformance.fake.journal import Journal
from palace_conformance.fake.lease import Contention, Lease, default_palace_path, holder_message
from palace_conformance.fake.options import ENV_ARGV0, ENV_JOURNAL, ENV_STATE

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any, NoReturn


def contention_text(contention: Contention) -> str:
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
        text = f"mempalace: {contention_text(contention)}"
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


class _CliUsage(UserError):
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
