"""``python -m mutation.stryker``: StrykerJS over a TypeScript copy, judged by the catalogue.

    python -m mutation.stryker                       every file of reference/pi (hours on 2 CPUs)
    python -m mutation.stryker --sample              CI's fixed sample: 3 mutants of one line
    python -m mutation.stryker --mutate src/x.ts:5-9 any Stryker --mutate selection
    python -m mutation.stryker --check REPORT.json   only judge a saved report
    python -m mutation.stryker --copy opencode ...   the same over reference/opencode

Stryker (pinned in the copy's package.json) mutates a sandbox copy of the copy and runs
``stryker/scenarios.mjs`` per mutant: the scenarios covering the mutated file's behaviours
(``stryker/areas.json``) against ``pi-extension:`` (the pi copy) or ``opencode-plugin:`` (the
OpenCode copy) at seed level. Then its JSON report is judged here: every mutant killed, timed out
or triaged as equivalent in ``stryker/triage.json``, with scores per file and per behaviour area.
Exit 0 only then (docs/mutation.md, "The pi copy").
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


#: each copy's sample is its provenance gate, the line that stamps only on a shared palace
COPIES = {"pi": Copy(ROOT / "reference" / "pi", "src/features/provenance.ts:41-41"),
          "opencode": Copy(ROOT / "reference" / "opencode", "src/provenance.ts:24-24")}
COPY = COPIES["pi"].folder
AREAS = COPIES["pi"].areas
TRIAGE = COPIES["pi"].triage
REPORT = COPIES["pi"].report
#: CI's sample: line 41 of provenance.ts (the gate that stamps only on a shared palace), 3 mutants
SAMPLE = COPIES["pi"].sample
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


def run_stryker(mutate: Sequence[str], folder: Path = COPY) -> None:
    """Run Stryker in the copy's folder (its own config), over ``mutate`` when given."""
    installation = _installation()
    env = _environment(installation)
    _npm_ci(env, folder)
    argv = [installation.node, str(folder / "node_modules" / "@stryker-mutator" / "core" / "bin"
                                   / "stryker.js"), "run"]
    if mutate:
        argv += ["--mutate", ",".join(mutate)]
    done = subprocess.run(argv, cwd=folder, env=env, check=False)
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
    parser.add_argument("--copy", choices=sorted(COPIES), default="pi",
                        help="which copy: reference/pi (default) or reference/opencode")
    parser.add_argument("--sample", action="store_true",
                        help="only the copy's sample (CI): " + ", ".join(
                            f"{name} {copy.sample}" for name, copy in sorted(COPIES.items())))
    parser.add_argument("--mutate", action="append", default=[], metavar="PATTERN",
                        help="a Stryker --mutate pattern (file, glob or file:from-to)")
    parser.add_argument("--check", type=Path, metavar="REPORT",
                        help="judge this saved Stryker JSON report; run nothing")
    args = parser.parse_args(argv)
    copy = COPIES[args.copy]
    try:
        if args.check is None:
            run_stryker([copy.sample] if args.sample else args.mutate, copy.folder)
        report = _load(args.check or copy.report, "Stryker report")
        lines, problems = judge(report, _load(copy.areas, "area map"),
                                _load(copy.triage, "triage file"))
    except StrykerError as exc:
        print(f"mutation.stryker: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    for problem in problems:
        print(f"PROBLEM {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
