"""``palace-conformance profile init``: draft a bridge profile by watching the bridge.

The draft goes to ``--out`` (or stdout) and validates against the bridge profile schema; the
review notes (what was guessed, what is missing) go to stderr, since JSON has no comments.
Exit status: 0 drafted, 1 nothing could be observed, 2 a usage problem (one line). The engine
(:mod:`palace_conformance.runner.profiling`) is imported inside the handler.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from palace_conformance.commands.declare import declare, declare_group
from palace_conformance.commands.usage import (
    RunUsageError,
    at_least_one,
    one_line,
    writable,
    write_text,
)
from palace_conformance.contract import DEFAULT_OP_TIMEOUT_MS, TRANSPORTS

PROG = "palace-conformance profile init"


def _out_path(flag: str, value: str | None, force: bool) -> Path | None:
    target = writable(flag, value)
    if target is not None and target.exists() and not force:
        raise RunUsageError(f"{flag} {value}: the file exists (a reviewed profile?); pass "
                            "--force to replace it or pick another name")
    return target


def _init_checked(args: argparse.Namespace) -> int:
    """Run one short observation session per transport (load, session start, a first prompt,
    list the tools, call one, shut down) and draft a bridge profile from what the bridge
    did: the variables it read, the files under HOME it looked for, the programs it tried to
    start, the tools and commands it registered. The draft is schema-valid but a starting
    point: the notes on stderr say what to review. Exit 0 drafted, 1 nothing observed, 2 a
    usage problem."""
    from palace_conformance.runner.profiling.draft import NothingObserved, draft_profile
    from palace_conformance.runner.profiling.observe import sessions_json

    at_least_one("--op-timeout-ms", args.op_timeout_ms)
    if not args.bridge.strip():
        raise RunUsageError("--bridge is empty (give 'reference', pi-extension:FILE or a "
                            "driver host command)")
    out = _out_path("--out", args.out, args.force)
    observations = _out_path("--observations", args.observations, args.force)
    transports = TRANSPORTS if args.transport == "both" else (args.transport,)
    try:
        outcome = draft_profile(args.bridge, out_dir=out.parent if out is not None else None,
                                transports=transports, op_timeout_ms=args.op_timeout_ms)
    except NothingObserved as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    text = json.dumps(outcome.draft.profile, indent=2) + "\n"
    write_text(observations, sessions_json(outcome.sessions))
    if out is None:
        sys.stdout.write(text)
    else:
        write_text(out, text)
    where = str(out) if out is not None else "stdout"
    print(f"{PROG}: DRAFT profile written to {where}; review it before use:", file=sys.stderr)
    for note in outcome.draft.notes:
        print(f"  - {note}", file=sys.stderr)
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _, actions = declare_group(sub, "profile", "bridge profiles: draft one by watching a bridge",
                               "Bridge profiles (docs/profiles.md).", "profile_command", "ACTION")
    init = declare(actions, "init", "draft a profile by watching the bridge against the fake",
                   one_line(PROG)(_init_checked))
    init.add_argument("--bridge", required=True, metavar="SPEC",
                      help="'reference', a Node host spec (pi-extension:FILE, ...) or a driver "
                      "host command")
    init.add_argument("--out", metavar="FILE",
                      help="write the draft here (default: stdout); a pi-extension entry is "
                      "written relative to this file's folder")
    init.add_argument("--force", action="store_true",
                      help="replace --out / --observations when they exist")
    init.add_argument("--observations", metavar="FILE",
                      help="also write what each session observed, as JSON (names and paths "
                      "only, never values)")
    init.add_argument("--transport", choices=(*TRANSPORTS, "both"), default="both",
                      help="which transports to observe (default both)")
    init.add_argument("--op-timeout-ms", type=int, default=DEFAULT_OP_TIMEOUT_MS, metavar="MS",
                      help=f"an op's deadline (default {DEFAULT_OP_TIMEOUT_MS})")
