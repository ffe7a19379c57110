"""``palace-conformance fidelity``'s engine: both targets through the script, then the verdict."""

from __future__ import annotations

import fnmatch
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from palace_conformance.fidelity.compare import Comparison, compare_records
from palace_conformance.fidelity.execute import run_script
from palace_conformance.fidelity.normalise import load_rules
from palace_conformance.fidelity.script import Script, load_script
from palace_conformance.fidelity.targets import Target, fake_target, real_target
from palace_conformance.real.embedding import running_stub
from palace_conformance.real.install import locate


def selected(script: Script, quick: bool, patterns: list[str]) -> tuple[Script, set[str] | None]:
    """The sessions to run and the point ids to compare (None: all of them)."""
    if quick:
        script = script.quick()
    if not patterns:
        return script, None
    wanted = {p for p in script.point_ids() if any(fnmatch.fnmatchcase(p, g) for g in patterns)}
    sessions = tuple(s for s in script.sessions if any(step.id in wanted for step in s.steps))
    return Script(sessions), wanted


def record_both(script: Script, real_python: str | None, root: Path, log: TextIO,
                jobs: int = 2) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the script against the real server and the fake at the same time (one thread each;
    every session has its own world, so they never share a lock or a palace)."""
    server = locate(real_python)
    start = time.monotonic()

    def progress(message: str) -> None:
        print(f"  {time.monotonic() - start:6.1f}s {message}", file=log, flush=True)

    with running_stub() as url:
        targets: list[Target] = [real_target(server, url), fake_target(root / "shims", url)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            real, fake = pool.map(lambda t: run_script(script, t, root, progress, jobs),
                                  targets)
    return real, fake


def run_fidelity(real_python: str | None, *, quick: bool = False,
                 select: list[str] | None = None, json_out: str | None = None,
                 keep: str | None = None, jobs: int = 2, out: TextIO = sys.stdout,
                 log: TextIO = sys.stderr) -> Comparison:
    """Record both targets and compare them; ``json_out`` gets the full record."""
    script, only = selected(load_script(), quick, select or [])
    rules = load_rules()
    with tempfile.TemporaryDirectory(prefix="palace-fidelity-") as scratch:
        root = Path(keep).absolute() if keep else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        real, fake = record_both(script, real_python, root, log, jobs)
        elapsed = time.monotonic() - started
    comparison = compare_records(real, fake, rules, only)
    for line in comparison.lines():
        print(line, file=out)
    print(f"({'quick' if quick else 'full'} run, {elapsed:.1f} s wall time)", file=log)
    if json_out:
        Path(json_out).write_text(json.dumps(
            {**comparison.to_json(), "wall_time_s": round(elapsed, 1), "quick": quick,
             "rules": [{"id": r.id, "masks": r.masks, "why": r.why} for r in rules],
             "records": {"real": real, "fake": fake}}, indent=1, ensure_ascii=False),
            encoding="utf-8")
    return comparison
