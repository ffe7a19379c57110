"""``palace-conformance ci``: what the repository's GitHub Action runs (action.yml only calls
this), so it is tested like any other command with the GitHub variables simulated.

``ci --prepare`` writes the step outputs the action needs before the run (whether the bridge runs
on the Node hosts, their cache path and key, the report directory, an artifact name); ``ci`` runs
the catalogue with a report directory, then appends the Markdown summary to
``$GITHUB_STEP_SUMMARY``, prints ``::error`` annotations and writes the outputs (paths, counts).
An empty option is an input left blank in the workflow: the same as not giving it. The engine is
imported in the handler only (the parser is built in every process)."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

from palace_conformance.commands.declare import declare

PROG = "palace-conformance ci"
#: where the report goes when --report-dir is blank: under $RUNNER_TEMP on a runner
REPORT_NAME = "palace-conformance-report"


def _given(value: str | None) -> str | None:
    """A workflow input left blank arrives as ""; treat it as absent."""
    return value.strip() if value and value.strip() else None


def _patterns(values: list[str]) -> list[str]:
    """``--select`` values, each possibly several patterns separated by spaces or newlines (a
    multi-line workflow input)."""
    return [part for value in values for part in value.split()]


def report_dir(args: argparse.Namespace, env: dict[str, str]) -> Path:
    given = _given(args.report_dir)
    if given:
        return Path(given)
    base = env.get("RUNNER_TEMP")
    return Path(base) / REPORT_NAME if base else Path(REPORT_NAME)


def artifact_name(shard: str | None) -> str:
    """An artifact name unique per shard (``/`` is not allowed in one)."""
    return REPORT_NAME + (f"-shard-{shard.replace('/', '-of-')}" if shard else "")


def run_argv(args: argparse.Namespace, report: Path) -> list[str]:
    """The ``palace-conformance run`` command line for these inputs."""
    argv = ["run", "--report-dir", str(report)]
    for flag, value in (("--bridge", args.bridge), ("--profile", args.profile),
                        ("--level", args.level), ("--baseline", args.baseline),
                        ("--transport", args.transport), ("--shard", args.shard),
                        ("--jobs", args.jobs)):
        if _given(value):
            argv += [flag, _given(value) or ""]
    for pattern in _patterns(args.select):
        argv += ["--select", pattern]
    return argv


def _bridge_spec(args: argparse.Namespace) -> str:
    """The bridge the run will drive: --bridge, else the profile's, else the reference."""
    bridge = _given(args.bridge)
    if bridge:
        return bridge
    profile = _given(args.profile)
    if profile:
        from palace_conformance.runner.profile import ProfileError, load_profile

        try:
            return load_profile(profile).bridge
        except ProfileError:
            return "reference"  # the run itself reports the profile's problem
    return "reference"


def _bridge_files(args: argparse.Namespace) -> list[str]:
    """Files an annotation may point at when the scenario file is not in the workspace."""
    files = []
    spec = _bridge_spec(args)
    if spec.startswith("pi-extension:"):
        files.append(spec.split(":", 1)[1])
    elif spec != "reference":  # a host command: the source files it names
        files += [word for word in spec.split() if re.search(r"\.(ts|js|mjs|py)$", word)]
    if _given(args.profile):
        files.append(_given(args.profile) or "")
    return files


def _prepare(args: argparse.Namespace, env: dict[str, str]) -> int:
    from palace_conformance.ci.workflow_commands import append_outputs
    from palace_conformance.hosts import node

    cache = node.cache_entry(node.node_home())
    outputs = {"node-hosts": "true" if node.is_node_spec(_bridge_spec(args)) else "false",
               "hosts-path": cache["path"], "hosts-key": cache["key"],
               "report-dir": str(report_dir(args, env)),
               "artifact-name": artifact_name(_given(args.shard))}
    for name, value in outputs.items():
        print(f"{name}: {value}")
    if "GITHUB_OUTPUT" in env:
        append_outputs(Path(env["GITHUB_OUTPUT"]), outputs)
    return 0


def _run_in_process(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                    argv: list[str]) -> int:
    """``palace-conformance run`` in this process, parsed by the sibling ``run`` parser (the
    command line's own, so its messages and checks are the same; no import of the CLI above)."""
    from palace_conformance.errors import UsageError

    print(f"{PROG}: palace-conformance {shlex.join(argv)}", flush=True)
    try:
        parsed = commands.choices[argv[0]].parse_args(argv[1:])
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    code: int = parsed.handler(parsed)
    return code


def _ci(args: argparse.Namespace) -> int:
    """Run the catalogue with a report directory, then write the Markdown summary to
    $GITHUB_STEP_SUMMARY, ::error annotations per failing check, and step outputs to
    $GITHUB_OUTPUT (report-dir, junit, results, counts). Blank options count as not given
    (workflow inputs left empty). docs/ci.md."""
    from palace_conformance.ci.workflow_commands import github_env

    env = github_env()
    if args.prepare:
        return _prepare(args, env)
    report = report_dir(args, env)
    code = _run_in_process(args.sibling_commands, run_argv(args, report))
    _publish(args, env, report, code)
    return code


def _publish(args: argparse.Namespace, env: dict[str, str], report: Path, code: int) -> None:
    """Summary, annotations and outputs from the report directory the run wrote."""
    import json

    from palace_conformance.ci.annotations import annotation_lines
    from palace_conformance.ci.workflow_commands import (
        append_outputs,
        append_summary,
        command,
    )
    from palace_conformance.runner.results import RunResult

    results = report / "results.json"
    summary = report / "summary.md"
    outputs = {"report-dir": str(report), "exit-code": str(code),
               "artifact-name": artifact_name(_given(args.shard))}
    if not results.is_file():  # a usage error: the run wrote nothing; its message is above
        print(command("error", f"palace-conformance did not run (exit {code}): see the step's "
                      "log", title="palace-conformance"), flush=True)
        if "GITHUB_STEP_SUMMARY" in env:
            append_summary(Path(env["GITHUB_STEP_SUMMARY"]),
                           f"## ❌ palace-conformance did not run (exit {code})\n\n"
                           "The step's log says why (a usage error: an input to fix).")
        if "GITHUB_OUTPUT" in env:
            append_outputs(Path(env["GITHUB_OUTPUT"]), outputs)
        return
    run = RunResult.from_json(json.loads(results.read_text(encoding="utf-8")))
    for line in annotation_lines(run, workspace=env.get("GITHUB_WORKSPACE"),
                                 fallback_files=_bridge_files(args),
                                 baseline=_given(args.baseline)):
        print(line, flush=True)
    if "GITHUB_STEP_SUMMARY" in env and summary.is_file():
        append_summary(Path(env["GITHUB_STEP_SUMMARY"]), summary.read_text(encoding="utf-8"))
    counts = run.counts()
    outputs |= {"results": str(results), "junit": str(report / "junit.xml"),
                "summary": str(summary), **{name.replace("_", "-"): str(value)
                                            for name, value in counts.items()}}
    if "GITHUB_OUTPUT" in env:
        append_outputs(Path(env["GITHUB_OUTPUT"]), outputs)


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ci = declare(sub, "ci", "the catalogue run as a GitHub Actions step (what action.yml calls)",
                 _ci, sibling_commands=sub)
    ci.add_argument("--prepare", action="store_true",
                    help="write only the outputs the action needs before the run: node-hosts "
                    "(true/false), hosts-path and hosts-key (for actions/cache), report-dir, "
                    "artifact-name")
    ci.add_argument("--bridge", default="", metavar="B", help="as run --bridge")
    ci.add_argument("--profile", default="", metavar="FILE", help="as run --profile")
    ci.add_argument("--level", default="", metavar="core|seed", help="as run --level")
    ci.add_argument("--baseline", default="", metavar="FILE", help="as run --baseline")
    ci.add_argument("--transport", default="", metavar="stdio|http|both",
                    help="as run --transport (default both)")
    ci.add_argument("--shard", default="", metavar="K/N", help="as run --shard")
    ci.add_argument("--select", action="append", default=[], metavar="PATTERNS",
                    help="as run --select; one value may hold several patterns separated by "
                    "spaces or newlines")
    ci.add_argument("--jobs", default="", metavar="N", help="as run --jobs")
    ci.add_argument("--report-dir", default="", metavar="DIR",
                    help=f"where the reports go (default $RUNNER_TEMP/{REPORT_NAME}, else "
                    f"./{REPORT_NAME})")
