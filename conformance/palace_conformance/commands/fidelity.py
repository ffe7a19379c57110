"""``palace-conformance fidelity``: argparse only (the engine loads when the command runs)."""

from __future__ import annotations

import argparse
import sys


def _fidelity(args: argparse.Namespace) -> int:
    from palace_conformance.fidelity.normalise import RulesError
    from palace_conformance.fidelity.run import run_fidelity
    from palace_conformance.fidelity.script import ScriptError
    from palace_conformance.real.install import RealServerMissing

    try:
        comparison = run_fidelity(args.real_python, quick=args.quick, select=args.select,
                                  json_out=args.json, keep=args.keep, jobs=args.jobs)
    except (RealServerMissing, ScriptError, RulesError) as exc:
        print(f"palace-conformance fidelity: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"palace-conformance fidelity: {exc.strerror or exc} "
              f"({getattr(exc, 'filename', None) or 'no file'}); check --json and --keep",
              file=sys.stderr)
        return 2
    return 1 if comparison.differences else 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "fidelity", help="run the same scripted sessions against the real mempalace 3.11.0 and "
        "the fake and report every difference the declared rules do not explain",
        description="Scripted stdio and HTTP sessions (handshake, every tool's validation and "
        "empty answers, business errors, HTTP statuses and headers, auth order, writer-lock "
        "contention, the CLI mine refusal) against the real server and the fake; exit 0 only "
        "when no difference is left unexplained (docs/real-server.md#fidelity).")
    parser.add_argument("--real-python", metavar="PY", help="a Python with mempalace==3.11.0 "
                        "installed (env PALACE_REAL_PYTHON; tox -e real-palace builds one)")
    parser.add_argument("--quick", action="store_true", help="only the sessions the script "
                        "marks quick (handshake, protocol, HTTP, auth, lock): the CI subset")
    parser.add_argument("--select", metavar="GLOB", action="append", default=[],
                        help="compare only the points whose id matches (repeatable), e.g. "
                        "'lock.*' or 'tools.diary_*'")
    parser.add_argument("--json", metavar="OUT", help="write the verdicts, the rules and both "
                        "full records here")
    parser.add_argument("--keep", metavar="DIR", help="run the worlds under DIR and keep them "
                        "(server stderr, palaces) instead of a temporary directory")
    parser.add_argument("--jobs", metavar="N", type=_jobs, default=2, help="sessions run at "
                        "a time per target (default 2; each has its own world)")
    parser.set_defaults(handler=_fidelity)


def _jobs(text: str) -> int:
    """A session count for argparse: a one-line error for 0 or 'x', never a traceback."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a session count: give 1 or more")
    return int(text)
