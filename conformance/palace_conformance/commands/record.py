"""``palace-conformance record``: argparse only; the relay and the draft load when it runs."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from palace_conformance.commands.declare import declare
from palace_conformance.scenarios.model import AREAS

DEFAULT_COMMAND = ("mempalace-mcp",)
#: set in the server's environment: a recorder started under another recorder (a launcher that
#: finds itself on PATH) refuses at once instead of nesting forever
ENV_ACTIVE = "PALACE_CONFORMANCE_RECORDING"
ID_PATTERN = re.compile(r"^[a-z0-9]+(\.[a-z0-9-]+)+$")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = declare(sub, "record", "stand in for the palace a bridge uses (stdio, or HTTP with "
                     "--upstream), relay the traffic to the real one and write a draft scenario "
                     "from it", run_record)
    parser.add_argument("--out", required=True, metavar="DRAFT.json",
                        help="where the draft goes (rewritten after every answered call)")
    parser.add_argument("--id", dest="scenario_id", metavar="ID",
                        help="the draft's scenario id, AREA.TOPIC.CASE (default: the file name "
                        "without .json, e.g. tool.recorded.my-session.json; a fixture's id must "
                        "equal its file name)")
    parser.add_argument("--grace-ms", type=int, default=2000, metavar="MS",
                        help="how long a server gets to exit after the bridge closed its "
                        "stdin, and after SIGTERM, before SIGKILL (default 2000)")
    http = parser.add_argument_group("HTTP (a bridge in remote mode)")
    http.add_argument("--upstream", metavar="URL",
                      help="record over HTTP: the real palace's full URL (what "
                      "MEMPALACE_REMOTE_URL held, e.g. https://palace.example/mcp)")
    http.add_argument("--host", default=None, metavar="HOST",
                      help="loopback address to listen on (default 127.0.0.1)")
    http.add_argument("--port", type=int, default=None, metavar="N",
                      help="port to listen on (default 0: a free one)")
    http.add_argument("--upstream-timeout-ms", type=int, default=None, metavar="MS",
                      help="how long the palace may stay silent (connect: at most 10000; "
                      "each read of an answer, a stream's gaps included) before the bridge "
                      "gets 504 or the stream is cut (default 120000)")
    parser.add_argument("server", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                        help="the real server to start (default: mempalace-mcp)")


def scenario_id_for(out: Path, given: str | None) -> str:
    """The id the draft carries; a bad one is refused before anything starts."""
    scenario_id = given if given is not None else out.name.removesuffix(".json")
    where = "--id" if given is not None else f"the file name {out.name!r}"
    if not ID_PATTERN.match(scenario_id):
        raise ValueError(f"{where} is not a scenario id (like 'tool.recorded.my-session'): "
                         "lower-case words joined by dots; pass --id or rename --out")
    area = scenario_id.split(".", 1)[0]
    if area not in AREAS:
        raise ValueError(f"{where} starts with unknown area {area!r}: start it with one of "
                         f"{', '.join(AREAS)} (e.g. 'tool.recorded.my-session')")
    return scenario_id


def run_record(args: argparse.Namespace) -> int:
    """Stdio: run as the palace a bridge spawns: start the real server (COMMAND, default
    mempalace-mcp) and copy every line both ways unchanged. HTTP (--upstream URL): listen on
    loopback as the palace a bridge in remote mode points at (it prints the
    MEMPALACE_REMOTE_URL to give the bridge) and forward every request to URL, answers
    streamed back unchanged, until Ctrl-C or SIGTERM. Either way it writes a draft scenario:
    each tools/call becomes a call_tool step expecting what the palace answered (volatile
    values left out, secrets and paths replaced). Validate it with 'fixtures validate' and
    run it with 'run' before adding it to the catalogue (docs/record.md)."""
    prog = "palace-conformance record"
    server = list(args.server)
    if server[:1] == ["--"]:
        server = server[1:]
    command = server or list(DEFAULT_COMMAND)
    out = Path(args.out)
    try:
        scenario_id = scenario_id_for(out, args.scenario_id)
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if args.upstream is not None:
        return _run_http(args, prog, out, scenario_id, server)
    http_only = [flag for flag, value in (("--host", args.host), ("--port", args.port),
                                          ("--upstream-timeout-ms", args.upstream_timeout_ms))
                 if value is not None]
    if http_only:
        print(f"{prog}: {http_only[0]} is for HTTP recording; add --upstream URL (the palace "
              "the bridge should reach through the recorder)", file=sys.stderr)
        return 2
    if args.grace_ms < 0:
        print(f"{prog}: --grace-ms must be 0 or more, not {args.grace_ms}", file=sys.stderr)
        return 2
    if os.environ.get(ENV_ACTIVE):
        print(f"{prog}: started under another recorder ({ENV_ACTIVE} is set): the server "
              f"command {command[0]!r} leads back to the recorder; give the real server's "
              "path after '--'", file=sys.stderr)
        return 2
    if not out.parent.is_dir():
        print(f"{prog}: --out {out}: no such directory {str(out.parent)!r}; create it first",
              file=sys.stderr)
        return 2

    from palace_conformance.record.draft import DraftWriter, build_draft, draft_relevant
    from palace_conformance.relay.stdio import FROM_PALACE, Message, Relay, RelayError

    recorded: list[Message] = []
    writer: DraftWriter | None = None

    def on_message(message: Message) -> None:
        if not draft_relevant(message):  # server requests, notifications: not the draft's
            return
        recorded.append(message)
        if message.direction == FROM_PALACE and writer is not None:
            writer.changed()  # written off the relay's path: a killed recorder keeps it

    env = {**os.environ, ENV_ACTIVE: "1"}
    relay = Relay(command, on_message, grace_s=args.grace_ms / 1000, env=env)
    memo: dict[Any, Any] = {}  # each call's step, built once (the cleaner never changes here)
    writer = DraftWriter(out, lambda: build_draft(list(recorded), scenario_id, memo=memo))
    try:
        code = relay.run()
    except RelayError as exc:  # nothing ran: no draft
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    writer.close()
    return code


def _http_problem(port: int, timeout_ms: int, out: Path, server: list[str]) -> str | None:
    """What is wrong with ``record --upstream``'s options, in one line, or None."""
    if server:
        return (f"--upstream records HTTP; {server[0]!r} is a stdio server command: give "
                "either --upstream URL or -- COMMAND, not both")
    if not 0 <= port <= 65535:
        return f"--port must be 0-65535 (0 picks a free one), not {port}"
    if timeout_ms <= 0:
        return f"--upstream-timeout-ms must be more than 0, not {timeout_ms}"
    if not out.parent.is_dir():
        return f"--out {out}: no such directory {str(out.parent)!r}; create it first"
    return None


def _run_http(args: argparse.Namespace, prog: str, out: Path, scenario_id: str,
              server: list[str]) -> int:
    """``record --upstream URL``: the HTTP relay until SIGINT/SIGTERM/SIGHUP, then exit 0."""
    port = 0 if args.port is None else args.port
    timeout_ms = 120000 if args.upstream_timeout_ms is None else args.upstream_timeout_ms
    problem = _http_problem(port, timeout_ms, out, server)
    if problem is not None:
        print(f"{prog}: {problem}", file=sys.stderr)
        return 2

    import asyncio
    import signal

    from palace_conformance.record.draft import (
        Cleaner,
        DraftWriter,
        build_draft,
        draft_relevant,
        path_replacements,
    )
    from palace_conformance.redaction import environment_secrets
    from palace_conformance.relay.http import HttpRelay, UpstreamError
    from palace_conformance.relay.stdio import FROM_PALACE, Message

    recorded: list[Message] = []
    try:
        relay = HttpRelay(args.upstream, recorded.append, host=args.host or "127.0.0.1",
                          port=port, read_s=timeout_ms / 1000)
    except UpstreamError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2

    cached: dict[str, Any] = {"secrets": None, "memo": {}, "cleaner": None}

    def build() -> dict[str, Any]:
        secrets = sorted(relay.secrets)
        if secrets != cached["secrets"]:  # a new token or session id: every step again
            cached.update(secrets=secrets, memo={}, cleaner=Cleaner(
                [*environment_secrets(), *secrets], path_replacements()))
        return build_draft(list(recorded), scenario_id, cleaner=cached["cleaner"],
                           memo=cached["memo"])

    writer: DraftWriter | None = None

    def on_message(message: Message) -> None:
        if not draft_relevant(message):  # a palace streaming server requests grows nothing
            return
        recorded.append(message)
        if message.direction == FROM_PALACE and writer is not None:
            writer.changed()  # never built on the event loop: the relay keeps its pace

    relay.on_message = on_message

    async def serve() -> int:
        try:
            await relay.start()
        except UpstreamError as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
        loop = asyncio.get_running_loop()
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(number, relay.stop)
        assert writer is not None
        writer.write()  # the draft exists once the line is out
        print(f"export MEMPALACE_REMOTE_URL={relay.url}", flush=True)
        print(f"{prog}: relaying {relay.url} to {args.upstream}; give the bridge the line "
              f"above, stop with Ctrl-C (the draft: {out})", file=sys.stderr, flush=True)
        await relay.serve()
        return 0

    writer = DraftWriter(out, build)
    try:
        code = asyncio.run(serve())
    except KeyboardInterrupt:  # Ctrl-C before the handlers were in place
        code = 0
    if code == 0:
        writer.close()
    return code
