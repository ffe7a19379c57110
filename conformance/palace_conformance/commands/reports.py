"""``palace-conformance replay BUNDLE`` and ``palace-conformance baseline update``.

The parsers are built on every invocation of the CLI (fakes included), so this module imports
nothing heavy; each handler imports what it needs. Exit codes follow ``run``: 0 green, 1 a
failure, 2 a usage problem reported in one line.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
from datetime import date
from pathlib import Path

from palace_conformance.commands.declare import declare, declare_group
from palace_conformance.commands.options import (
    add_op_timeout,
    add_server_options,
    chosen_server,
)
from palace_conformance.commands.usage import (
    RunUsageError,
    as_usage_error,
    at_least_one,
    one_line,
    writable,
)
from palace_conformance.runner.interrupts import interrupt
from palace_conformance.runner.selection import default_level, host_argv, load_profile_arg

REPLAY = "palace-conformance replay"
BASELINE = "palace-conformance baseline"
DEFAULT_BASELINE = "conformance-baseline.json"


def _replay_checked(args: argparse.Namespace) -> int:
    """Re-run the scenario of a repro bundle (written by 'run --report-dir DIR' under
    DIR/bundles/) on its transport, against the bridge given with --bridge (or --profile): a
    bundle is data, so the bridge it recorded is shown, never run by itself. Reports and
    exits like 'run': 0 passed, 1 failed, 2 usage problem."""
    from palace_conformance.runner.execution.suite import HostProbeError
    from palace_conformance.runner.reports.console import make_progress, render_summary
    from palace_conformance.runner.reports.replay import ReplayError, load_bundle, replay, verdict
    from palace_conformance.runner.reports.report_dir import public_run

    at_least_one("--op-timeout-ms", args.op_timeout_ms)
    json_path = writable("--json", args.json)
    with as_usage_error(ReplayError):
        bundle = load_bundle(args.bundle)
    profile = load_profile_arg(args.profile)
    recorded = shown_bridge(bundle.bridge)
    bridge = args.bridge or (profile.bridge if profile is not None else None)
    if bridge is None:  # a bundle is data: its command line is never run unless the user says so
        raise RunUsageError(f"{args.bundle}: replay runs only the bridge you name; this bundle "
                            f"was recorded with {recorded}: add --bridge {recorded} to run it "
                            "(or --bridge reference)")
    if bridge != bundle.bridge:
        print(f"note: the bundle was recorded with --bridge {recorded}; replaying against "
              f"{shown_bridge(bridge)} as asked", flush=True)
    if args.server != bundle.server:  # fake and real fail differently: say which one this is
        print(f"note: the bundle was recorded against the {bundle.server} server; replaying "
              f"against the {args.server} server as asked"
              + (" (add --server real to replay it there)" if bundle.server == "real" else ""),
              flush=True)
    argv = host_argv(bridge)
    level = args.level or bundle.level or default_level(bridge, profile)
    print(f"replaying {bundle.scenario.id} on {' and '.join(bundle.transports)} against "
          f"{bridge}", flush=True)
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with chosen_server(args) as real:
            run = replay(bundle, argv, op_timeout_ms=args.op_timeout_ms,
                         progress=make_progress(), level=level, profile=profile, real=real)
    except HostProbeError as exc:
        raise RunUsageError(f"the bridge host failed: {exc}") from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    run.server = args.server
    render_summary(run)
    print(verdict(bundle, run), flush=True)
    if json_path is not None:
        try:
            public = public_run(run, {bundle.scenario.id: bundle.scenario})
            json_path.write_text(json.dumps(public.to_json(), indent=1, ensure_ascii=False,
                                            default=str), encoding="utf-8")
        except OSError as exc:
            raise RunUsageError(f"cannot write {json_path}: {exc.strerror or exc}") from None
    return run.exit_code


def shown_bridge(bridge: str) -> str:
    """A ``--bridge`` value as one shell word on one line (a bundle's may hold anything)."""
    quoted = shlex.quote(bridge)
    return quoted if quoted.isprintable() else repr(bridge)


def _expires(value: str | None) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise RunUsageError(f"--expires {value}: not a date (write YYYY-MM-DD)") from None


def _baseline_update_checked(args: argparse.Namespace) -> int:
    """Write a baseline that lists every failing result of REPORT (a 'run --json' or
    report-dir results.json file). Entries of the existing baseline (--out, or --baseline)
    that still cover a failure keep their reason, issue and expiry; entries whose results
    pass now are dropped; entries for scenarios the report lacks are kept."""
    from palace_conformance.runner.compare.sources import load_result_file
    from palace_conformance.runner.verdict.baseline import (
        BaselineError,
        load_baseline,
        update_baseline,
        write_baseline,
    )

    expires = _expires(args.expires)
    if args.reason is not None and not args.reason.strip():
        raise RunUsageError("--reason is empty (say in one line why the failures are accepted)")
    out = writable("--out", args.out)
    assert out is not None
    run = load_result_file(args.report)
    old_path = args.baseline or (args.out if out.exists() else None)
    old = None
    if old_path is not None:
        with as_usage_error(BaselineError):
            old = load_baseline(old_path, flag="--baseline" if args.baseline else "--out")
    reason = args.reason or (f"failing in {Path(args.report).name} on "
                             f"{date.today().isoformat()} (say why it is accepted)")
    update = update_baseline(run, old, reason=reason, issue=args.issue, expires=expires)
    try:
        write_baseline(update.baseline, out)
    except OSError as exc:
        raise RunUsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(f"wrote {out}: {len(update.baseline.entries)} entr"
          f"{'y' if len(update.baseline.entries) == 1 else 'ies'} ({len(update.kept)} kept, "
          f"{len(update.added)} added, {len(update.dropped)} dropped as passing)")
    for entry in update.dropped:
        print(f"  dropped {entry.key}: passes in {args.report}")
    for entry in update.added:
        print(f"  added {entry.key}")
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = declare(
        sub, "replay", "re-run a repro bundle against a bridge", one_line(REPLAY)(_replay_checked))
    replay.add_argument("bundle", metavar="BUNDLE", help="the bundle directory")
    replay.add_argument("--bridge", metavar="reference|COMMAND",
                        help="the bridge to run against (required unless --profile names one; "
                        "the bundle's own is shown, never run by itself)")
    replay.add_argument("--profile", metavar="FILE",
                        help="the bridge's profile (docs/profiles.md), as the run had it")
    replay.add_argument("--level", choices=("core", "seed"), default=None,
                        help="judge at core or seed (default: the level the bundle records)")
    add_op_timeout(replay)
    replay.add_argument("--json", metavar="FILE", help="write the replay's result model as JSON")
    add_server_options(replay)

    _, baseline_sub = declare_group(
        sub, "baseline", "maintain an expected-failure baseline",
        "Expected-failure baselines (docs/baselines.md): known failures that keep "
        "'run --baseline FILE' green until fixed.", "baseline_command")
    update = declare(baseline_sub, "update", "write a baseline listing a report's current failures",
                     one_line(f"{BASELINE} update")(_baseline_update_checked))
    update.add_argument("--from", dest="report", required=True, metavar="REPORT.json",
                        help="the run's JSON result")
    update.add_argument("--out", default=DEFAULT_BASELINE, metavar="FILE",
                        help=f"the baseline to write (default {DEFAULT_BASELINE}); its current "
                        "entries are the starting point when it exists")
    update.add_argument("--baseline", metavar="FILE",
                        help="start from this baseline instead of --out")
    update.add_argument("--reason", help="reason recorded on new entries")
    update.add_argument("--issue", metavar="URL|ID", help="issue recorded on new entries")
    update.add_argument("--expires", metavar="YYYY-MM-DD",
                        help="expiry date recorded on new entries")
