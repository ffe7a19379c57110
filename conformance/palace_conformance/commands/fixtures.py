"""``palace-conformance fixtures validate|list|coverage``: the fixture author's tools.

``validate`` is what CI runs on every change to ``fixtures/``; ``list`` finds scenarios by area or
behaviour; ``coverage`` shows which behaviours still lack a scenario (and fails while any does, so
the catalogue cannot quietly fall behind BEHAVIOURS.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palace_conformance.commands.declare import declare, declare_group
from palace_conformance.commands.options import add_scenario_paths
from palace_conformance.scenarios.behaviours import (
    ID_PATTERN,
    Behaviour,
    BehavioursError,
    default_path,
    load_behaviours,
)
from palace_conformance.scenarios.model import AREAS, Scenario

if TYPE_CHECKING:
    from palace_conformance.scenarios.loader import Catalogue, Context

# The loader pulls in jsonschema; it is imported inside the handlers so that every other
# ``palace-conformance`` subcommand (notably ``fake http``) starts without paying for it.


def load_catalogue(*args: Any, **kwargs: Any) -> Catalogue:
    from palace_conformance.scenarios.loader import load_catalogue as load

    return load(*args, **kwargs)


def display(path: Path) -> str:
    from palace_conformance.scenarios.loader import display as show

    return show(path)


def _context(extra: Sequence[Behaviour] = ()) -> Context:
    known = {b.id: b for b in load_behaviours()}
    for behaviour in extra:
        known.setdefault(behaviour.id, behaviour)
    from palace_conformance.scenarios.loader import Context

    return Context.default(list(known.values()))


def _report_invalid(catalogue: Catalogue, command: str) -> None:
    if catalogue.problems:
        bad = len({p.path for p in catalogue.problems})
        print(f"palace-conformance fixtures {command}: {bad} scenario file(s) skipped as invalid; "
              "run 'palace-conformance fixtures validate' to see why", file=sys.stderr)


def _validate(args: argparse.Namespace) -> int:
    """Validate scenario files: JSON syntax, schema_version, the JSON Schema, then ids (=
    file name, unique), behaviour IDs, tool names and fault plans. One line per problem;
    exit 1 when there is any."""
    from palace_conformance.scenarios.loader import shipped_roots

    # the slow tier is validated with the catalogue: CI runs validate, not the slow tier
    catalogue = load_catalogue(args.paths or shipped_roots(slow=True), _context())
    for problem in catalogue.problems:
        print(problem)
    if not catalogue.files and not catalogue.problems:
        where = ", ".join(args.paths) if args.paths else "the shipped fixtures"
        print(f"palace-conformance fixtures validate: no scenario files in {where} "
              "(give files or directories of *.json)", file=sys.stderr)
        return 1
    if catalogue.problems:
        bad = {p.path for p in catalogue.problems}
        total = len(bad | {display(f) for f in catalogue.files})
        print(f"{len(catalogue.problems)} problem(s) in {len(bad)} of {total} path(s)",
              file=sys.stderr)
        return 1
    print(f"{len(catalogue.scenarios)} scenario(s) valid")
    return 0


def _list(args: argparse.Namespace) -> int:
    """List the scenarios (id, transports, behaviour IDs, title), optionally only one area's or
    those citing one behaviour ID; as a table, or as JSON."""
    if args.area is not None and args.area not in AREAS:
        print(f"palace-conformance fixtures list: unknown area {args.area!r} "
              f"(use one of: {', '.join(AREAS)})", file=sys.stderr)
        return 2
    context = _context()
    if args.covers is not None and args.covers not in context.behaviours:
        print(f"palace-conformance fixtures list: unknown behaviour ID {args.covers!r} "
              "(see 'palace-conformance fixtures coverage')", file=sys.stderr)
        return 2
    catalogue = load_catalogue(args.scenarios, context)
    chosen = [s for s in sorted(catalogue.scenarios, key=lambda s: s.id)
              if (args.area is None or s.area == args.area)
              and (args.covers is None or args.covers in s.covers)]
    if args.json:
        print(json.dumps([s.summary() for s in chosen], indent=2, ensure_ascii=False))
    else:
        _print_table(chosen)
    _report_invalid(catalogue, "list")
    return 1 if catalogue.problems else 0


def _print_table(scenarios: Sequence[Scenario]) -> None:
    rows = [(s.id, ",".join(s.transports), ",".join(s.covers), s.title) for s in scenarios]
    if not rows:
        print("no scenarios match", file=sys.stderr)
        return
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3])


def _dimensions(args: argparse.Namespace) -> int:
    from palace_conformance.scenarios import dimensions
    from palace_conformance.scenarios.loader import shipped_roots

    vocabulary = dimensions.load_vocabulary()
    stale = dimensions.unknown_situations(vocabulary)
    if stale:
        print(f"palace-conformance fixtures coverage: {', '.join(stale)} in dimensions.json has no "
              "derivation in this palace-conformance (upgrade, or drop the situation)",
              file=sys.stderr)
        return 2
    catalogue = load_catalogue(args.scenarios or shipped_roots(slow=True), _context())
    table = dimensions.build_table(catalogue.scenarios, vocabulary)
    if args.json:
        print(json.dumps(table.to_json(), indent=2, ensure_ascii=False))
    else:
        print(dimensions.markdown(table))
    _report_invalid(catalogue, "coverage")
    return 1 if catalogue.problems else 0


def _coverage(args: argparse.Namespace) -> int:
    """Each behaviour ID with the scenarios that cite it; exit 1 when one has none. With
    --dimensions, the behaviour x dimension table derived from the scenarios, with its gaps."""
    if args.dimensions:
        return _dimensions(args)
    try:
        behaviours = load_behaviours(args.behaviours)
    except BehavioursError as exc:
        print(f"palace-conformance fixtures coverage: {exc}", file=sys.stderr)
        return 2
    catalogue = load_catalogue(args.scenarios, _context(behaviours))
    by_id: dict[str, list[str]] = {b.id: [] for b in behaviours}
    unknown: dict[str, list[str]] = {}
    for scenario in sorted(catalogue.scenarios, key=lambda s: s.id):
        for bid in scenario.covers:
            target = by_id[bid] if bid in by_id else unknown.setdefault(bid, [])
            target.append(scenario.id)
    uncovered = [b.id for b in behaviours if not by_id[b.id]]
    if args.json:
        print(json.dumps({
            "behaviours": [{"id": b.id, "title": b.title, "scenarios": by_id[b.id]}
                           for b in behaviours],
            "uncovered": uncovered,
            "not_in_behaviours_file": unknown,
        }, indent=2, ensure_ascii=False))
    else:
        width = max(len(b.id) for b in behaviours)
        for b in behaviours:
            cited = ", ".join(by_id[b.id]) if by_id[b.id] else "MISSING (no scenario)"
            print(f"{b.id.ljust(width)}  {cited}")
        covered = len(behaviours) - len(uncovered)
        print(f"{covered} of {len(behaviours)} behaviour(s) covered by "
              f"{len(catalogue.scenarios)} scenario(s); {len(uncovered)} without a scenario")
    for bid, cited_by in sorted(unknown.items()):
        print(f"palace-conformance fixtures coverage: {bid} is cited by {', '.join(cited_by)} but "
              f"is not in {display_source(args.behaviours)}", file=sys.stderr)
    _report_invalid(catalogue, "coverage")
    return 1 if uncovered or catalogue.problems else 0


def display_source(path: str | None) -> str:
    return display(Path(path)) if path else display(default_path())


def _behaviour_id(text: str) -> str:
    if not ID_PATTERN.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a behaviour ID like STDIO-05")
    return text


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _, fixtures_sub = declare_group(
        sub, "fixtures", "validate and list scenario fixtures",
        "The language-neutral scenario fixtures (fixtures/scenarios/<area>/<id>.json).",
        "fixtures_command")

    validate = declare(fixtures_sub, "validate",
                       "check scenario files against the schema and the catalogue rules", _validate)
    add_scenario_paths(validate)

    listing = declare(fixtures_sub, "list", "list scenarios, optionally filtered", _list)
    listing.add_argument("--area", metavar="AREA", help=f"only this area ({', '.join(AREAS)})")
    listing.add_argument("--covers", metavar="ID", type=_behaviour_id,
                         help="only scenarios citing this behaviour ID")
    _add_listing_options(listing, "a table")

    coverage = declare(fixtures_sub, "coverage",
                       "each behaviour ID with its scenarios; exit 1 when one has none", _coverage)
    coverage.add_argument("--behaviours", metavar="FILE",
                          help="behaviours.json or a BEHAVIOURS.md checklist "
                          "(default: the shipped fixtures/behaviours.json)")
    coverage.add_argument("--dimensions", action="store_true",
                          help="print the behaviour x dimension table (knob value classes, feature "
                          "pairs, failure sequences, ...) derived from the scenarios, slow tier "
                          "included, with its gaps (Markdown; --json for JSON); exit 0 with gaps")
    _add_listing_options(coverage, "text")


def _add_listing_options(parser: argparse.ArgumentParser, instead_of: str) -> None:
    """What both listings take: JSON output, and scenario folders other than the shipped."""
    parser.add_argument("--json", action="store_true", help=f"print JSON instead of {instead_of}")
    parser.add_argument("--scenarios", metavar="DIR", action="append",
                        help="read scenarios from DIR instead of the shipped ones (repeatable)")
