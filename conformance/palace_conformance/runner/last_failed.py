"""``run --last-failed``: a small record of which results failed, so the next run can re-run
only those (as pytest's ``--lf`` does).

One record per bridge spec and server (``--server``), so runs against two bridges, or one bridge
against the fake and the real palace, never mix: by default
``$XDG_CACHE_HOME/palace-conformance/last-failed/<hash of the spec and server>.json``
(``~/.cache`` when the variable is unset), or ``DIR/last-failed.json`` with ``--report-dir DIR``
(the record names its bridge and server; a record of another counts as none). Every finished
run updates the record the way pytest does: the results it ran replace their entries, and the
failures of runs it did not make (another selection, ``-x``) are kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from palace_conformance.cache_home import kit_cache_root
from palace_conformance.contract import TRANSPORTS
from palace_conformance.errors import RunUsageError
from palace_conformance.runner.results import PARITY, RunResult

if TYPE_CHECKING:
    from palace_conformance.scenarios.model import Scenario

RECORD = "last-failed.json"
FORMAT = 1
#: a directory for the records instead of the user's cache (the test suite points it at a temp dir)
ENV_DIR = "PALACE_CONFORMANCE_LAST_FAILED_DIR"

Key = tuple[str, str]  # (scenario id, transport or "parity")
DEFAULT_SERVER = "fake"  # records written before the server was recorded were all the fake's


def target(bridge: str, server: str) -> str:
    """How notes name what a record is of."""
    return bridge if server == DEFAULT_SERVER else f"{bridge} with --server {server}"


def record_path(bridge: str, server: str = DEFAULT_SERVER,
                report_dir: Path | None = None) -> Path:
    """Where the record of runs of ``bridge`` against ``server`` lives."""
    if report_dir is not None:
        return report_dir / RECORD
    # the fake's records keep the name they always had; another server's gets its own
    key = bridge if server == DEFAULT_SERVER else f"{bridge}\0{server}"
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    chosen = os.environ.get(ENV_DIR)
    if chosen:
        return Path(chosen) / f"{digest}.json"
    root = kit_cache_root()
    if root is None:
        raise RunUsageError(f"no cache directory for the --last-failed record: set HOME, an "
                            f"absolute XDG_CACHE_HOME or {ENV_DIR}")
    return root / "last-failed" / f"{digest}.json"


def read_record(path: Path, bridge: str, server: str = DEFAULT_SERVER) -> set[Key] | None:
    """The failures recorded for ``bridge`` against ``server``; None when there is no usable
    record (none yet, an unreadable file, or one kept for another bridge or server)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("bridge") != bridge:
        return None
    if data.get("server", DEFAULT_SERVER) != server:
        return None
    failed = data.get("failed")
    if not isinstance(failed, list):
        return None
    return {(str(item["scenario"]), str(item["transport"])) for item in failed
            if isinstance(item, dict) and "scenario" in item and "transport" in item}


def updated(previous: Iterable[Key], run: RunResult) -> set[Key]:
    """The record after ``run``: its own failures, plus earlier ones it did not re-run."""
    ran = {(r.scenario, r.transport) for r in run.results}
    return {key for key in previous if key not in ran} | {
        (r.scenario, r.transport) for r in run.failed()}


def write_record(path: Path, bridge: str, failed: Iterable[Key],
                 server: str = DEFAULT_SERVER) -> None:
    """Replace the record atomically (parallel runs never leave half a file); OSError
    propagates."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"format": FORMAT, "bridge": bridge, "server": server,
            "failed": [{"scenario": s, "transport": t} for s, t in sorted(failed)]}
    handle, temporary = tempfile.mkstemp(prefix=".last-failed-", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(body, out, indent=1)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Rerun:
    """What ``--last-failed`` runs: the scenarios and, per scenario, its transports (None: the
    whole selection, with ``note`` saying why)."""

    scenarios: list[Scenario]
    only: Mapping[str, frozenset[str]] | None
    note: str


def rerun(recorded: set[Key] | None, scenarios: list[Scenario], of: str, where: Path) -> Rerun:
    """The re-run plan from a record: a failed transport runs again on its own; a failed
    parity runs both transports again (parity compares them); ``of`` names the record's
    bridge and server (:func:`target`)."""
    everything = "running every selected scenario"
    if recorded is None:
        return Rerun(scenarios, None, f"--last-failed: no record of a previous run against "
                     f"{of} ({where}); {everything}")
    if not recorded:
        return Rerun(scenarios, None, f"--last-failed: the last run against {of} had no "
                     f"failures; {everything}")
    only: dict[str, set[str]] = {}
    for scenario_id, transport in recorded:
        only.setdefault(scenario_id, set()).update(
            TRANSPORTS if transport == PARITY else (transport,))
    chosen = [s for s in scenarios if s.id in only]
    if not chosen:
        return Rerun(scenarios, None, f"--last-failed: none of the {len(recorded)} recorded "
                     f"failure(s) is among the selected scenarios; {everything}")
    chosen_ids = {s.id for s in chosen}
    count = sum(1 for sid, _ in recorded if sid in chosen_ids)
    return Rerun(chosen, {sid: frozenset(ts) for sid, ts in only.items()},
                 f"--last-failed: re-running {count} failed result(s) of the last run "
                 f"({len(chosen)} scenario(s))")
