"""``palace-conformance official``: the official MCP conformance suite against the fake, the real
mempalace, any URL, and the reference bridge (argparse only; the engines load when a command
runs)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from palace_conformance.commands.declare import declare, declare_group
from palace_conformance.commands.options import add_real_python

#: the client scenarios that apply to a tools-only, static-bearer client (docs/official-suite.md)
CLIENT_SCENARIOS = ("initialize", "tools_call", "sse-retry",
                    "elicitation-sep1034-client-defaults")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _, official_sub = declare_group(
        sub, "official", "run the official MCP conformance suite (Node >= 22 from npm, pinned)",
        "The official MCP conformance suite (@modelcontextprotocol/conformance, pinned), "
        "installed on first use into the Node hosts' cache. Verdicts are judged against an "
        "expected-verdict baseline with a reason per entry (docs/official-suite.md).",
        "official_command")

    server = declare(official_sub, "server", "server scenarios against --url, --fake and/or "
                     "--real; with two or more, their verdicts and masked checks must be "
                     "identical", _server)
    server.add_argument("--url", action="append", default=[], metavar="URL",
                        help="a running MCP server (loopback, no token: the suite sends none); "
                        "repeatable")
    server.add_argument("--fake", action="store_true", help="start the fake HTTP server")
    server.add_argument("--real", action="store_true",
                        help="start the real mempalace HTTP server (see --real-python)")
    add_real_python(server, "with --real")
    server.add_argument("--scenario", action="append", default=[], metavar="NAME",
                        help="only this scenario (repeatable; default: all, pending included)")
    _common(server)

    client = declare(official_sub, "client", "client scenarios against the reference bridge "
                     "through the adapter", _client)
    client.add_argument("--bridge", default="reference", choices=["reference"],
                        help="the client under test (only the reference bridge has an adapter)")
    client.add_argument("--scenario", action="append", default=[], metavar="NAME",
                        help="only this scenario (repeatable; default: "
                        f"{', '.join(CLIENT_SCENARIOS)})")
    _common(client)

    declare(official_sub, "install", "install the pinned suite (and Node >= 22 when the "
            "system's is older); idempotent", _install)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="keep the suite's results here (default: a temporary directory)")
    parser.add_argument("--baseline", type=Path, metavar="FILE",
                        help="expected verdicts (default: the shipped baseline.yaml)")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="write verdicts, problems and timings as JSON")


def _fail(message: str) -> int:
    print(f"palace-conformance official: {message}", file=sys.stderr)
    return 2


def _install(args: argparse.Namespace) -> int:
    """Install the pinned suite into the Node hosts' cache (and Node >= 22 when the system's is
    older); idempotent."""
    from palace_conformance.official.suite import SuiteError, ensure_suite

    try:
        suite = ensure_suite()
    except SuiteError as exc:
        return _fail(str(exc))
    print(f"{suite.cli.parents[2].name}/{suite.cli.parents[1].name}@{suite.version} with node "
          f"{suite.node}")
    return 0


def _server(args: argparse.Namespace) -> int:
    """Run the suite's server scenarios against each server given (a running --url, the fake,
    the real mempalace) and judge the verdicts against the baseline; with two or more servers,
    their verdicts and masked checks must be identical."""
    from palace_conformance.official import baseline as baselines
    from palace_conformance.official import results, suite, targets
    from palace_conformance.real.install import RealServerMissing

    wanted = [("url", url) for url in args.url]
    wanted += [("fake", "")] if args.fake else []
    wanted += [("real", "")] if args.real else []
    if not wanted:
        return _fail("name a server: --url URL, --fake and/or --real")
    try:
        baseline = baselines.load_baseline(args.baseline)
        installed = suite.ensure_suite()
        runs: dict[str, dict[str, results.ScenarioResult]] = {}
        timings: dict[str, float] = {}
        with targets.scratch(args.out) as work:
            for index, (kind, url) in enumerate(wanted):
                name = kind if kind != "url" else f"url{index + 1}"
                place = work / name
                place.mkdir(parents=True, exist_ok=True)
                began = time.monotonic()
                if kind == "fake":
                    with targets.fake_server(place) as started:
                        suite.run_server(installed, started, place / "out", args.scenario)
                elif kind == "real":
                    with targets.real_server(place, args.real_python) as started:
                        suite.run_server(installed, started, place / "out", args.scenario)
                else:
                    suite.run_server(installed, url, place / "out", args.scenario)
                timings[name] = time.monotonic() - began
                runs[name] = results.load_results(place / "out", "server")
                if not runs[name]:
                    return _fail(f"the suite wrote no results for {name}; see "
                                 f"{place / 'out' / 'suite-output.txt'} (use --out to keep it)")
    except (suite.SuiteError, targets.TargetError, RealServerMissing,
            baselines.BaselineError, ValueError) as exc:
        return _fail(str(exc))
    problems: dict[str, list[str]] = {name: baseline.judge("server", found)
                                      for name, found in runs.items()}
    names = list(runs)
    differences = [line for other in names[1:]
                   for line in results.compare(runs[names[0]], runs[other], (names[0], other))]
    _print_table(runs, baseline, "server")
    for name, found in problems.items():
        for line in found:
            print(f"{name}: {line}")
    for line in differences:
        print(f"differs: {line}")
    for name, seconds in timings.items():
        print(f"{name}: {len(runs[name])} scenario(s) in {seconds:.1f} s")
    _write_json(args.json, runs, problems, differences, timings)
    bad = any(problems.values()) or bool(differences)
    print("FAILED" if bad else "OK: every verdict as expected"
          + (f"; {', '.join(names)} identical" if len(names) > 1 else ""))
    return 1 if bad else 0


def _client(args: argparse.Namespace) -> int:
    """Run the suite's client scenarios against the reference bridge, through the adapter that
    execs palace-bridge, and judge the verdicts against the baseline."""
    from palace_conformance.official import baseline as baselines
    from palace_conformance.official import results, suite, targets

    scenarios = args.scenario or list(CLIENT_SCENARIOS)
    try:
        baseline = baselines.load_baseline(args.baseline)
        installed = suite.ensure_suite()
        with targets.scratch(args.out) as work:
            timings = suite.run_client(installed, scenarios, work / "out")
            found = results.load_results(work / "out", "client")
    except (suite.SuiteError, baselines.BaselineError, ValueError) as exc:
        return _fail(str(exc))
    missing = [s for s in scenarios if s not in found]
    runs = {args.bridge: found}
    problems = {args.bridge: baseline.judge("client", found)
                + [f"{s}: no result (unknown scenario?)" for s in missing]}
    _print_table(runs, baseline, "client")
    for line in problems[args.bridge]:
        print(f"{args.bridge}: {line}")
    for scenario, seconds in timings.items():
        print(f"{scenario}: {seconds:.1f} s")
    _write_json(args.json, runs, problems, [], timings)
    bad = bool(problems[args.bridge])
    print("FAILED" if bad else "OK: every verdict as expected")
    return 1 if bad else 0


def _print_table(runs: dict[str, Any], baseline: Any, mode: str) -> None:
    names = list(runs)
    scenarios = sorted({s for found in runs.values() for s in found})
    width = max([len(s) for s in scenarios] + [8])
    print(f"{'scenario':<{width}}  " + "  ".join(f"{n:<12}" for n in names) + "  expected")
    for scenario in scenarios:
        cells = []
        for name in names:
            result = runs[name].get(scenario)
            if result is None:
                cells.append(f"{'-':<12}")
                continue
            passed, judged = result.judged
            cells.append(f"{result.verdict + f' {passed}/{judged}':<12}")
        entry = baseline.expected(mode, scenario)
        print(f"{scenario:<{width}}  " + "  ".join(cells) + "  "
              + (f"{entry.verdict}: {entry.reason}" if entry else "PASS"))


def _write_json(path: Path | None, runs: dict[str, Any], problems: dict[str, list[str]],
                differences: list[str], timings: dict[str, float]) -> None:
    if path is None:
        return
    payload = {
        "verdicts": {name: {s: r.verdict for s, r in sorted(found.items())}
                     for name, found in runs.items()},
        "problems": problems,
        "differences": differences,
        "seconds": {k: round(v, 1) for k, v in timings.items()},
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
