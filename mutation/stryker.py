"""``python -m mutation.stryker``: StrykerJS over a TypeScript copy, judged by the catalogue.

    python -m mutation.stryker                       every file of reference/pi (hours on 2 CPUs)
    python -m mutation.stryker --sample              CI's fixed sample: 3 mutants of one line
    python -m mutation.stryker --mutate src/x.ts:5-9 any Stryker --mutate selection
    python -m mutation.stryker --check REPORT.json   only judge a saved report
    python -m mutation.stryker --copy opencode ...   the same over reference/opencode
    python -m mutation.stryker --draw 60 --seed 28   a seeded random draw over every file, resumable
    python -m mutation.stryker --draw 0              re-judge the draw so far, run nothing

Stryker (pinned in the copy's package.json) mutates a sandbox copy of the copy and runs
``mutation/stryker_scenarios.mjs`` (one script for both copies) per mutant: the scenarios
covering the mutated file's behaviours
(``stryker/areas.json``) against ``pi-extension:`` (the pi copy) or ``opencode-plugin:`` (the
OpenCode copy) at seed level. Then its JSON report is judged here: every mutant killed, timed out
or triaged as equivalent in ``stryker/triage.json``, with scores per file and per behaviour area.
Exit 0 only then (docs/mutation.md, "The pi copy"). The policy both copies share
(``reference/seed-policy``) is mirrored into the copy's ``seed-policy/`` for the run, so Stryker
mutates it too and reports it as its own files (``seed-policy/...``); the mirror is removed after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mutation import stryker_draw
from palace_conformance.hosts import node

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Copy:
    """One TypeScript copy: its folder (its Stryker config, its stryker/ files) and CI's sample."""

    folder: Path
    sample: str

    @property
    def areas(self) -> Path:
        return self.folder / "stryker" / "areas.json"

    @property
    def triage(self) -> Path:
        return self.folder / "stryker" / "triage.json"

    @property
    def report(self) -> Path:
        return self.folder / "reports" / "mutation" / "mutation.json"


#: each copy's sample is the shared provenance gate, the line that stamps only on a shared palace
#: (in the mirror of the shared policy), judged by that copy's scenarios
COPIES = {"pi": Copy(ROOT / "reference" / "pi", "seed-policy/provenance.ts:39-39"),
          "opencode": Copy(ROOT / "reference" / "opencode", "seed-policy/provenance.ts:39-39")}
#: the seed policy both copies import (reference/seed-policy), and its mirror's name in a copy
SHARED = ROOT / "reference" / "seed-policy"
MIRROR = "seed-policy"
COPY = COPIES["pi"].folder
AREAS = COPIES["pi"].areas
TRIAGE = COPIES["pi"].triage
REPORT = COPIES["pi"].report
#: CI's sample: line 39 of the shared provenance.ts (the gate that stamps only on a shared
#: palace), 3 mutants
SAMPLE = COPIES["pi"].sample
KILLED = {"Killed", "Timeout"}
LAUNCH = "from palace_conformance.cli import main; main()"


class StrykerError(Exception):
    """A problem that stops the run, said in one line."""


def source_path(folder: Path, file: str) -> Path:
    """Where a file Stryker names for the copy in ``folder`` lives in the checkout: the shared
    policy's mirror names (``seed-policy/x.ts``) are ``reference/seed-policy/x.ts``."""
    prefix = f"{MIRROR}/"
    return SHARED / file[len(prefix):] if file.startswith(prefix) else folder / file


def shared_sources() -> list[str]:
    """The shared policy's files as Stryker names them in a copy (``seed-policy/x.ts``; its
    tests are not mirrored)."""
    return sorted(f"{MIRROR}/{p.name}" for p in SHARED.glob("*.ts"))


@contextmanager
def shared_policy(folder: Path) -> Iterator[Path]:
    """The shared seed policy mirrored into ``folder/seed-policy`` while Stryker runs there.

    Stryker mutates only files inside its project (the copy) and copies only those into its
    sandbox; the copy imports the policy from ``reference/seed-policy``, which in the sandbox is
    ``.stryker-tmp/seed-policy``, and ``stryker_scenarios.mjs`` links that name to the sandbox's
    (mutated) mirror. The mirror (its ``*.ts`` and ``package.json``, not its tests) is removed
    afterwards; it is git-ignored."""
    mirror = folder / MIRROR
    shutil.rmtree(mirror, ignore_errors=True)
    mirror.mkdir()
    try:
        for source in [*sorted(SHARED.glob("*.ts")), SHARED / "package.json"]:
            shutil.copy2(source, mirror / source.name)
        yield mirror
    finally:
        shutil.rmtree(mirror, ignore_errors=True)


def _installation() -> node.Installation:
    """The Node hosts' install (Node >= 22); installs them when missing, as the ts tests do."""
    found = node.read_installation()
    if found is None:
        done = subprocess.run([sys.executable, "-c", LAUNCH, "hosts", "install"], check=False,
                              timeout=node.NPM_TIMEOUT_S * 2)
        found = node.read_installation()
        if done.returncode != 0 or found is None:
            raise StrykerError("installing the Node hosts failed: run `palace-conformance hosts "
                               "install` and read its error")
    return found


def _environment(installation: node.Installation) -> dict[str, str]:
    """Node >= 22 and the kit's venv first on PATH (Stryker 10 needs Node 22; the command calls
    ``palace-conformance``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPALACE_", "PALACE_"))}
    paths = [str(Path(installation.node).parent), str(Path(sys.executable).parent),
             env.get("PATH", os.defpath)]
    env["PATH"] = os.pathsep.join(paths)
    return env


def _npm_ci(env: dict[str, str], folder: Path) -> None:
    stamp = folder / "node_modules" / ".lock-digest"
    digest = (folder / "package-lock.json").read_text()
    if stamp.exists() and stamp.read_text() == digest:
        return
    npm = shutil.which("npm", path=env["PATH"])
    if npm is None:
        raise StrykerError("npm not found on PATH: install Node.js (with npm)")
    done = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise StrykerError(f"npm ci in {folder.relative_to(ROOT)} failed: "
                           f"{done.stderr.strip()[-500:]}")
    stamp.write_text(digest)


def run_stryker(mutate: Sequence[str], folder: Path = COPY, extra: Sequence[str] = (),
                 more_env: dict[str, str] | None = None) -> None:
    """Run Stryker in the copy's folder (its own config), over ``mutate`` when given."""
    installation = _installation()
    env = {**_environment(installation), **(more_env or {})}
    _npm_ci(env, folder)
    argv = [installation.node, str(folder / "node_modules" / "@stryker-mutator" / "core" / "bin"
                                   / "stryker.js"), "run"]
    if mutate:
        argv += ["--mutate", ",".join(mutate)]
    done = subprocess.run([*argv, *extra], cwd=folder, env=env, check=False)
    if done.returncode != 0:
        raise StrykerError(f"stryker exited {done.returncode} (its log is above)")


def _anchors(copy: Copy) -> dict[str, str]:
    """Every mutant of the copy: key -> anchor; the triage file's anchors checked against them."""
    installation = _installation()
    _npm_ci(_environment(installation), copy.folder)
    files = sorted(_load(copy.areas, "area map")["files"])
    mutants = stryker_draw.list_mutants(installation.node, copy.folder, files)
    equivalents(_load(copy.triage, "triage file"), (m["anchor"] for m in mutants))
    return {m["key"]: m["anchor"] for m in mutants}


def run_draw(copy: Copy, size: int, seed: int, fresh: bool, concurrency: int) -> int:
    """Draw ``size`` mutants of the whole copy with ``seed`` (growing the draw kept in
    ``reports/draw/``), run those not yet killed, and judge the draw; ``size`` 0 only judges."""
    areas = _load(copy.areas, "area map")["files"]
    installation = _installation()
    _npm_ci(_environment(installation), copy.folder)
    mutants = stryker_draw.list_mutants(installation.node, copy.folder, sorted(areas))
    equivalents(_load(copy.triage, "triage file"), (m["anchor"] for m in mutants))
    state = copy.folder / "reports" / "draw"
    if size == 0:  # judge only: draw.json stays as it is (a run in progress reads it)
        if not (state / "draw.json").exists():
            raise StrykerError(f"no draw in {state}: run with --draw N first")
        return _judge_draw(copy, state, areas)
    drawn = stryker_draw.prepare(state, mutants, size, seed, fresh)
    ranges = stryker_draw.pending_ranges(drawn, stryker_draw.read_journal(state),
                                         equivalents(_load(copy.triage, "triage file")))
    if ranges:
        extra = ["--plugins", f"@stryker-mutator/*,{stryker_draw.JOURNAL_PLUGIN}",
                 "--reporters", "clear-text,progress-append-only,json,palace-journal",
                 "--concurrency", str(concurrency), "--timeoutMS", str(stryker_draw.TIMEOUT_MS)]
        run_stryker(ranges, copy.folder, extra, {"PALACE_STRYKER_STATE": str(state),
                                                 "PALACE_MUTATION_SLACK_FACTOR":
                                                     stryker_draw.SLACK_FACTOR})
    return _judge_draw(copy, state, areas)


def _judge_draw(copy: Copy, state: Path, areas: dict[str, list[str]]) -> int:
    saved = json.loads((state / "draw.json").read_text())
    equivalent = equivalents(_load(copy.triage, "triage file"))
    files, by_area, total, untriaged = stryker_draw.tally(
        saved["mutants"], stryker_draw.read_journal(state), equivalent, saved["per_file"], areas)
    print(f"draw of {len(saved['mutants'])} of {saved['total']} mutants, seed {saved['seed']}")
    print("\n".join(stryker_draw.markdown(files, by_area, total)))
    triage = _load(copy.triage, "triage file")
    open_ = {e["mutant"]: e["behaviour"] for e in triage.get("not_yet_killed", [])}
    for m in untriaged:
        if m["anchor"] in open_:  # still a survivor in the score, with the check it asks for
            print(f"NOT YET KILLED {m['anchor']} ({open_[m['anchor']]})")
        else:
            print(f"UNTRIAGED survivor {m['anchor']} (line {m['start']['line']})")
    waiting = [m for m in untriaged if m["anchor"] not in open_]
    return 1 if waiting or total.pending or total.broken else 0


def _area(behaviour: str) -> str:
    return behaviour.split("-")[0]


def report_key(file: str, mutant: dict[str, Any]) -> str:
    """A Stryker JSON report mutant's key (its positions are 1-based; the key's columns 0-based)."""
    s, e = mutant["location"]["start"], mutant["location"]["end"]
    return (f"{file}:{s['line']}:{s['column'] - 1}-{e['line']}:{e['column'] - 1}:"
            f"{mutant['mutatorName']}:{mutant.get('replacement', '')}")


def equivalents(triage: dict[str, Any], anchors: Iterable[str] | None = None) -> dict[str, str]:
    """The triage file's equivalent survivors, anchor -> reason; with ``anchors`` (every mutant of
    the copy), an entry naming none of them is refused: the code changed, triage it again."""
    found = {e["mutant"]: e["reason"] for e in triage.get("equivalent", [])}
    if anchors is not None:
        known = set(anchors)
        for anchor in found:
            if anchor not in known:
                raise StrykerError(f"stale triage entry {anchor!r}: no mutant of the copy has that "
                                   f"anchor now; triage it again under the anchor a run prints")
    return found


def judge(report: dict[str, Any], areas: dict[str, Any], triage: dict[str, Any],
          anchors: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Markdown lines of the scores per file and per area, and the problems (untriaged survivors,
    broken runs). ``anchors`` maps each mutant's key to its anchor (mutation/stryker_list.mjs)."""
    equivalent = equivalents(triage)
    anchors = anchors or {}
    per_file: dict[str, Counter[str]] = defaultdict(Counter)
    per_area: dict[str, Counter[str]] = defaultdict(Counter)
    problems: list[str] = []
    for file, entry in sorted(report["files"].items()):
        for mutant in entry["mutants"]:
            line = mutant["location"]["start"]["line"]
            anchor = anchors.get(report_key(file, mutant), f"{file}:{line}")
            status = mutant["status"]
            if status in KILLED:
                verdict = "killed"
            elif status == "Survived" and anchor in equivalent:
                verdict = "equivalent"
            elif status == "Survived":
                verdict = "survived"
                problems.append(f"UNTRIAGED survivor {anchor} (line {line}): kill it with a "
                                f"catalogue check or triage it in stryker/triage.json")
            else:  # RuntimeError, CompileError, NoCoverage, ...: the run proved nothing
                verdict = "broken"
                problems.append(f"{anchor} (line {line}): {status} "
                                f"({(mutant.get('statusReason') or '')[-200:]})")
            per_file[file][verdict] += 1
            for area in {_area(b) for b in areas["files"].get(file, [])}:
                per_area[area][verdict] += 1
    lines = ["| file or area | mutants | killed | equivalent | survived | broken | score |",
             "|---|---|---|---|---|---|---|"]
    for name, counts in [*sorted(per_file.items()), *sorted(per_area.items())]:
        total = sum(counts.values())
        judged = total - counts["equivalent"] - counts["broken"]
        score = f"{100 * counts['killed'] / judged:.1f} %" if judged else "-"
        lines.append(f"| {name} | {total} | {counts['killed']} | {counts['equivalent']} | "
                     f"{counts['survived']} | {counts['broken']} | {score} |")
    return lines, problems


def _load(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise StrykerError(f"cannot read {what} {path}: {exc}") from None
    if not isinstance(data, dict):
        raise StrykerError(f"{what} {path} is not a JSON object")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mutation.stryker", description=__doc__.split(
        "\n")[0])
    parser.add_argument("--copy", choices=sorted(COPIES), default="pi",
                        help="which copy: reference/pi (default) or reference/opencode")
    parser.add_argument("--sample", action="store_true",
                        help="only the copy's sample (CI): " + ", ".join(
                            f"{name} {copy.sample}" for name, copy in sorted(COPIES.items())))
    parser.add_argument("--mutate", action="append", default=[], metavar="PATTERN",
                        help="a Stryker --mutate pattern (file, glob or file:from-to)")
    parser.add_argument("--check", type=Path, metavar="REPORT",
                        help="judge this saved Stryker JSON report; run nothing")
    parser.add_argument("--draw", type=int, metavar="N",
                        help="a seeded random draw of N mutants over every file (reports/draw/, "
                             "resumable, grows with a larger N); 0 judges the draw so far")
    parser.add_argument("--seed", type=int, default=28, help="the draw's seed (default 28)")
    parser.add_argument("--fresh", action="store_true", help="forget the draw kept so far")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="mutants judged at once in a draw (default 1)")
    args = parser.parse_args(argv)
    copy = COPIES[args.copy]
    try:
        with shared_policy(copy.folder):
            if args.draw is not None:
                return run_draw(copy, args.draw, args.seed, args.fresh, args.concurrency)
            if args.check is None:
                run_stryker([copy.sample] if args.sample else args.mutate, copy.folder)
            report = _load(args.check or copy.report, "Stryker report")
            lines, problems = judge(report, _load(copy.areas, "area map"),
                                    _load(copy.triage, "triage file"), _anchors(copy))
    except (StrykerError, stryker_draw.DrawError) as exc:
        print(f"mutation.stryker: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    for problem in problems:
        print(f"PROBLEM {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
