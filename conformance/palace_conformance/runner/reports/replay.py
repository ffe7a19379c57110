"""``palace-conformance replay BUNDLE``: run a repro bundle's scenario again, on its transport(s).

The bundle's fixture is loaded and validated like any scenario file, its redacted secrets get
fresh values (:func:`.redact.restore_markers`), and the scenario runs through the same suite
machinery as ``run``, against the bridge the user names (``--bridge``, or a ``--profile``'s):
a bundle is data, so the command line it recorded is shown, never run. "Does it still fail?" and
"does the reference bridge pass it?" are one command each, with the same exit codes as ``run``.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palace_conformance.contract import TRANSPORTS
from palace_conformance.errors import UntrustedInputError
from palace_conformance.runner.reports.bundle import MANIFEST, SCENARIO_FILE
from palace_conformance.runner.reports.redact import restore_markers
from palace_conformance.runner.results import RunResult
from palace_conformance.scenarios import paths
from palace_conformance.scenarios.model import Scenario


class ReplayError(UntrustedInputError):
    """A bundle that cannot be replayed; one line naming the problem and the fix."""

if TYPE_CHECKING:
    from palace_conformance.runner.profile import Profile


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: dict[str, Any]
    scenario: Scenario

    @property
    def transports(self) -> tuple[str, ...]:
        return tuple(self.manifest["transports"])

    @property
    def bridge(self) -> str:
        """The bridge the run was recorded with: shown to the user, never run by itself."""
        return str(self.manifest.get("bridge") or "reference")

    @property
    def server(self) -> str:
        """The palace the run was recorded against (bundles from before ``--server``: the fake)."""
        server = self.manifest.get("server")
        return server if server in ("fake", "real") else "fake"

    @property
    def level(self) -> str | None:
        """The level the failure was judged at (bundles from before levels have none)."""
        level = self.manifest.get("level")
        return str(level) if level in ("core", "seed") else None


BUNDLE_FILE_MAX_BYTES = 64 * 1024 * 1024  # a bundle's manifest or fixture (journals aside)


def _read_json(path: Path, what: str) -> Any:
    from palace_conformance import untrusted_file as untrusted

    fix = "regenerate the bundle with 'palace-conformance run --report-dir DIR'"
    if not path.exists() and not path.is_symlink():
        raise ReplayError(f"{path.parent}: not a repro bundle (no {path.name}); give a "
                          "directory under REPORT/bundles/")
    try:
        raw = untrusted.read_bytes(path, what=what, fix=fix, max_bytes=BUNDLE_FILE_MAX_BYTES)
        return untrusted.parse_json(raw, what=what, path=path, fix=fix)
    except untrusted.UntrustedFileError as exc:
        raise ReplayError(f"{path}: unreadable {what} ({exc.problem}); {fix}") from None


def load_bundle(path: str | Path) -> Bundle:
    """Read and check a bundle; the scenario comes back validated, secrets freshly filled in."""
    from palace_conformance.scenarios.loader import ScenarioError, load_scenario

    root = Path(path)
    if not root.is_dir():
        raise ReplayError(f"{path}: no such bundle directory (bundles are written under "
                          "REPORT/bundles/ by 'palace-conformance run --report-dir REPORT')")
    manifest = _read_json(root / MANIFEST, "manifest")
    transports = manifest.get("transports") if isinstance(manifest, dict) else None
    if not isinstance(transports, list) or not transports or \
            not set(transports) <= set(TRANSPORTS):
        raise ReplayError(f"{root / MANIFEST}: malformed manifest (no 'transports' list); "
                          "regenerate the bundle")
    data = restore_markers(_read_json(root / SCENARIO_FILE, "fixture"))
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise ReplayError(f"{root / SCENARIO_FILE}: not a scenario (no 'id')")
    sid = data["id"]
    if not paths.SCENARIO_ID.match(sid):  # it names a file below: checked before any write
        raise ReplayError(f"{root / SCENARIO_FILE}: id {sid[:80]!r} is not a scenario id "
                          "(lower-case dotted words such as tool.errors.x); regenerate the bundle")
    with tempfile.TemporaryDirectory(prefix="pc-replay-") as scratch:
        try:
            copy = paths.confine(scratch, f"{sid}.json", "scenario id")
        except paths.PathEscape as exc:
            raise ReplayError(f"{root / SCENARIO_FILE}: {exc}") from None
        copy.write_text(json.dumps(data), encoding="utf-8")
        try:
            scenario = load_scenario(copy)
        except ScenarioError as exc:
            raise ReplayError(f"{root / SCENARIO_FILE}: {str(exc).split(': ', 1)[-1]}") from None
    scenario = dataclasses.replace(scenario, path=root / SCENARIO_FILE)
    return Bundle(root, manifest, scenario)


def replay(bundle: Bundle, host_argv: tuple[str, ...], *, op_timeout_ms: int,
           jobs: int = 2, progress: Any = None, level: str = "seed",
           profile: Profile | None = None, real: Any = None) -> RunResult:
    """Run the bundle's scenario on its transport(s); a parity bundle also gets its comparison
    (``suite.HostProbeError`` when the host cannot even say hello); ``real``: a
    ``RealServerSetup`` (``replay --server real``)."""
    from palace_conformance.runner.execution.execute import RunOptions
    from palace_conformance.runner.execution.suite import SuiteOptions, run_suite
    from palace_conformance.runner.execution.world import FAKE_PALACE

    options = SuiteOptions(run=RunOptions(host_argv=host_argv, op_timeout_ms=op_timeout_ms,
                                          level=level, profile=profile,
                                          server=real if real is not None else FAKE_PALACE),
                           jobs=jobs, transports=bundle.transports)
    return run_suite([bundle.scenario], options, progress=progress)


def verdict(bundle: Bundle, run: RunResult) -> str:
    """One line: what the bundle recorded and what the replay saw."""
    transport = str(bundle.manifest.get("transport", ""))
    result = run.by_id(bundle.scenario.id, transport)
    now = result.status if result is not None else ("passed" if run.ok else "failed")
    was = bundle.manifest.get("status", "?")
    same = "reproduced" if now == was else "changed"
    return (f"replay of {bundle.scenario.id} [{transport}]: recorded {was}, now {now} "
            f"({same})")
