"""``palace-conformance merge RESULT.json...``: join the ``run --shard K/N --json`` results of
CI jobs into one result, JUnit, Markdown summary and HTML matrix.

Exits like ``run`` on the joined result (0 green, 1 a failure), so the job that merges can be
the fleet's gate; 2 on a usage problem (an unreadable file, results of two bridges or levels, a
shard missing or given twice), in one line. Engines are imported inside the handler.
"""

from __future__ import annotations

import argparse
import json
import sys

from palace_conformance.commands.declare import declare
from palace_conformance.commands.usage import (
    RunUsageError,
    as_usage_error,
    one_line,
    writable,
    write_text,
)

PROG = "palace-conformance merge"


def _merge_checked(args: argparse.Namespace) -> int:
    """Join the JSON results of 'palace-conformance run --shard K/N --json FILE' (one per CI
    job, same bridge and level) into one result, and write it as JSON, JUnit, Markdown and
    the HTML matrix. Prints the usual summary and exits like 'run' on the joined result: 0
    green, 1 a failure, 2 a usage problem."""
    from palace_conformance.runner.compare.matrix import build, render_html
    from palace_conformance.runner.compare.sources import Source, bridge_label, load_result_file
    from palace_conformance.runner.reports.console import render_summary
    from palace_conformance.runner.reports.junit import write_junit
    from palace_conformance.runner.reports.markdown import render_markdown
    from palace_conformance.runner.reports.merge import MergeError, bridge_identity, merge_runs

    json_path = writable("--json", args.json)
    junit_path = writable("--junit", args.junit)
    markdown_path = writable("--markdown", args.markdown)
    html_path = writable("--html", args.html)
    named = [(path, load_result_file(path, flag="")) for path in args.results]
    with as_usage_error(MergeError):
        run = merge_runs(named)
    render_summary(run, sys.stdout, quiet=args.quiet)
    outcome = f"the merged run {'passed' if run.ok else 'failed'}"
    write_text(json_path, json.dumps(run.to_json(), indent=1, ensure_ascii=False, default=str),
               outcome=outcome)
    if junit_path is not None:
        try:
            write_junit(run, junit_path)
        except OSError as exc:
            raise RunUsageError(f"cannot write {junit_path}: {exc.strerror or exc} "
                                f"({outcome})") from None
    write_text(markdown_path, render_markdown(run), outcome=outcome)
    if html_path is not None:
        source = Source(bridge_label(bridge_identity(run)), run, ", ".join(args.results),
                        tuple(run.host.capabilities), journals=False)
        command = "palace-conformance merge " + " ".join(args.results)
        write_text(html_path, render_html(build([source], command=command)), outcome=outcome)
    return run.exit_code


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = declare(sub, "merge", "join the shards' 'run --json' results into one report",
                    one_line(PROG)(_merge_checked))
    merge.add_argument("results", nargs="+", metavar="RESULT.json",
                       help="the shards' 'run --json' files")
    merge.add_argument("--json", metavar="FILE", help="write the joined result model as JSON")
    merge.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    merge.add_argument("--markdown", metavar="FILE",
                       help="write the Markdown summary (for a pull request comment)")
    merge.add_argument("--html", metavar="FILE",
                       help="write the HTML matrix page (as 'palace-conformance matrix')")
    merge.add_argument("-q", "--quiet", action="store_true",
                       help="no table: only the failures and the totals")
