"""``python -m mutation.stryker``: StrykerJS over the pi copy, judged by the catalogue.

    python -m mutation.stryker                       every file of reference/pi (hours on 2 CPUs)
    python -m mutation.stryker --sample              CI's fixed sample: 3 mutants of one line
    python -m mutation.stryker --mutate src/x.ts:5-9 any Stryker --mutate selection
    python -m mutation.stryker --check REPORT.json   only judge a saved report

Stryker (pinned in reference/pi/package.json) mutates a sandbox copy of the pi copy and runs
``stryker/scenarios.mjs`` per mutant: the scenarios covering the mutated file's behaviours
(``stryker/areas.json``) against ``pi-extension:`` at seed level. Then its JSON report is judged
here: every mutant killed, timed out or triaged as equivalent in ``stryker/triage.json``, with
scores per file and per behaviour area. Exit 0 only then (docs/mutation.md, "The pi copy").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from palace_conformance.hosts import node

ROOT = Path(__file__).resolve().parents[1]
COPY = ROOT / "reference" / "pi"
AREAS = COPY / "stryker" / "areas.json"
TRIAGE = COPY / "stryker" / "triage.json"
REPORT = COPY / "reports" / "mutation" / "mutation.json"
#: CI's sample: line 41 of provenance.ts (the gate that stamps only on a shared palace), 3 mutants
SAMPLE = "src/features/provenance.ts:41-41"
KILLED = {"Killed", "Timeout"}
LAUNCH = "from palace_conformance.cli import main; main()"


class StrykerError(Exception):
    """A problem that stops the run, said in one line."""


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


def _npm_ci(env: dict[str, str]) -> None:
    stamp = COPY / "node_modules" / ".lock-digest"
    digest = (COPY / "package-lock.json").read_text()
    if stamp.exists() and stamp.read_text() == digest:
        return
    npm = shutil.which("npm", path=env["PATH"])
    if npm is None:
        raise StrykerError("npm not found on PATH: install Node.js (with npm)")
    done = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=COPY,
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise StrykerError(f"npm ci in reference/pi failed: {done.stderr.strip()[-500:]}")
    stamp.write_text(digest)


def run_stryker(mutate: Sequence[str]) -> None:
    """Run Stryker in reference/pi (its own config), over ``mutate`` when given."""
    installation = _installation()
    env = _environment(installation)
    _npm_ci(env)
    argv = [installation.node, str(COPY / "node_modules" / "@stryker-mutator" / "core" / "bin"
                                   / "stryker.js"), "run"]
    if mutate:
        argv += ["--mutate", ",".join(mutate)]
    done = subprocess.run(argv, cwd=COPY, env=env, check=False)
    if done.returncode != 0:
        raise StrykerError(f"stryker exited {done.returncode} (its log is above)")


def _area(behaviour: str) -> str:
    return behaviour.split("-")[0]


def judge(report: dict[str, Any], areas: dict[str, Any],
          triage: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Markdown lines of the scores per file and per area, and the problems (untriaged survivors,
    broken runs, stale triage entries)."""
    equivalent = {(e["file"], e["line"], e["mutator"], e["replacement"]): e["reason"]
                  for e in triage.get("equivalent", [])}
    per_file: dict[str, Counter[str]] = defaultdict(Counter)
    per_area: dict[str, Counter[str]] = defaultdict(Counter)
    problems: list[str] = []
    for file, entry in sorted(report["files"].items()):
        for mutant in entry["mutants"]:
            line = mutant["location"]["start"]["line"]
            key = (file, line, mutant["mutatorName"], mutant.get("replacement", ""))
            status = mutant["status"]
            if status in KILLED:
                verdict = "killed"
            elif status == "Survived" and key in equivalent:
                verdict = "equivalent"
            elif status == "Survived":
                verdict = "survived"
                problems.append(f"{file}:{line} {mutant['mutatorName']} -> "
                                f"{mutant.get('replacement', '')!r} survived: kill it with a "
                                f"catalogue check or triage it in stryker/triage.json")
            else:  # RuntimeError, CompileError, NoCoverage, ...: the run proved nothing
                verdict = "broken"
                problems.append(f"{file}:{line} {mutant['mutatorName']}: {status} "
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
    parser.add_argument("--sample", action="store_true", help=f"only {SAMPLE} (CI)")
    parser.add_argument("--mutate", action="append", default=[], metavar="PATTERN",
                        help="a Stryker --mutate pattern (file, glob or file:from-to)")
    parser.add_argument("--check", type=Path, metavar="REPORT",
                        help="judge this saved Stryker JSON report; run nothing")
    args = parser.parse_args(argv)
    try:
        if args.check is None:
            run_stryker([SAMPLE] if args.sample else args.mutate)
        report = _load(args.check or REPORT, "Stryker report")
        lines, problems = judge(report, _load(AREAS, "area map"), _load(TRIAGE, "triage file"))
    except StrykerError as exc:
        print(f"mutation.stryker: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    for problem in problems:
        print(f"PROBLEM {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
