"""pytest plugin: the scenario fixtures as test items, for bridges whose CI already speaks pytest.

``pytest --palace-bridge=reference`` (or a driver host command) collects each scenario file as a
:class:`ScenarioFile` (pytest's non-Python test files) whose items are the scenario on each
transport, named like ``stdio.timeout.stall-kills-child[stdio]`` (plus ``[parity]`` when both
transports run), and that fail with the check records' messages. Paths narrow as they do for
test files: ``pytest fixtures/scenarios/stdio`` runs that directory's scenarios, ``pytest
X.json`` one scenario, ``X.json::ID[stdio]`` one item; with no path among the arguments the
whole catalogue runs beside the project's own tests. ``--palace-scenarios`` says where the
catalogue is (default: the shipped scenarios); ``--palace-transport``, ``--palace-select``
(globs, repeatable) and ``--palace-baseline`` mean what ``run``'s flags mean: a known failure is
an xfail, a baseline entry whose result passes now fails as stale, an expired entry no longer
excuses its failure.

Registered through the ``pytest11`` entry point, so this module is imported by every pytest run
of every project that has palace-conformance installed: it imports nothing but pytest and the
driver vocabulary (``contract``, standard library only), and it adds no item, hook or cost unless
``--palace-bridge`` or ``--palace-profile`` is given.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from palace_conformance.contract import SHARED_RUN_OPTIONS, TRANSPORTS
from palace_conformance.errors import ConformanceError

if TYPE_CHECKING:
    from palace_conformance.runner.execution.execute import RunOptions
    from palace_conformance.runner.results import HostInfo, ScenarioResult
    from palace_conformance.runner.verdict.baseline import BaselineFile
    from palace_conformance.scenarios.model import Scenario

RESULT_PROPERTY = "palace_result"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("palace-conformance", "MemPalace bridge conformance scenarios")
    group.addoption("--palace-bridge", metavar="reference|COMMAND", default=None,
                    help="run the palace-conformance scenarios against this bridge host "
                    "('reference', a Node host spec, or a driver host command); without it the "
                    "plugin does nothing")
    group.addoption("--palace-scenarios", action="append", default=[], metavar="PATH",
                    help="scenario files or directories (default: the shipped scenarios)")
    group.addoption("--palace-profile", metavar="FILE", default=None,
                    help="a bridge profile (docs/profiles.md); its entry is the bridge unless "
                    "--palace-bridge names one")
    for name, spec in SHARED_RUN_OPTIONS.items():
        group.addoption(f"--palace-{name}", **spec)


def pytest_configure(config: pytest.Config) -> None:
    if not (config.getoption("palace_bridge") or config.getoption("palace_profile")):
        return
    config.pluginmanager.register(PalaceSuite(config), "palace-conformance-suite")


class PalaceFailure(ConformanceError):
    """A scenario result that fails the item; ``str()`` is the report body."""


def _describe(result: ScenarioResult, note: str = "") -> str:
    lines = [f"{result.scenario} [{result.transport}] {result.status.replace('_', ' ')}"
             f" (covers {', '.join(result.covers) or '-'}): {result.title}"]
    for check in result.failures:
        where = f" step {check.step}" if check.step is not None else ""
        lines.append(f"  {check.pointer}{where}: {check.message}")
    if note:
        lines.append(note)
    return "\n".join(lines)


class PalaceItem(pytest.Item):
    """One scenario on one transport (or ``parity``: the comparison of both)."""

    def __init__(self, *, scenario: Scenario, transport: str, suite: PalaceSuite,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.transport = transport
        self.suite = suite
        for behaviour in scenario.covers:
            self.user_properties.append(("covers", behaviour))

    def runtest(self) -> None:
        result = self.suite.result(self.scenario, self.transport)
        self.user_properties.append((RESULT_PROPERTY, json.dumps(
            {"scenario": result.scenario, "transport": result.transport,
             "status": result.status})))
        self.suite.judge(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        from palace_conformance.redaction import CONSOLE  # standard library only

        if isinstance(excinfo.value, PalaceFailure):
            return CONSOLE.text(str(excinfo.value))
        return CONSOLE.text(str(super().repr_failure(excinfo)))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # the space keeps pytest from showing the id's dots as "::" (it rewrites a location
        # that ends the node id); failure headers read "<id> [<transport>]"
        return self.scenario.path, None, f"{self.scenario.id} [{self.transport}]"


class ScenarioFile(pytest.File):
    """One scenario file of the catalogue: its items, or none when ``--palace-select`` leaves
    the scenario out (the file is claimed all the same, so naming it is no collection error)."""

    def __init__(self, *, scenario: Scenario | None, suite: PalaceSuite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.suite = suite

    def collect(self) -> Iterator[PalaceItem]:
        if self.scenario is not None:
            yield from self.suite.items(self, self.scenario)


class PalaceSuite:
    """The active plugin: configuration, collection, the runs, and the baseline's verdicts."""

    def __init__(self, config: pytest.Config) -> None:
        from palace_conformance.errors import RunUsageError
        from palace_conformance.runner.selection import (
            bridge_of,
            default_level,
            host_argv,
            load_profile_arg,
        )

        self.config = config
        try:
            self.profile = load_profile_arg(config.getoption("palace_profile"))
        except RunUsageError as exc:
            raise pytest.UsageError(f"--palace-profile: {exc}") from None
        bridge = bridge_of(config.getoption("palace_bridge"), self.profile)
        try:
            self.argv = host_argv(bridge)
        except RunUsageError as exc:
            raise pytest.UsageError(f"--palace-bridge: {exc}") from None
        self.level = config.getoption("palace_level") or default_level(bridge, self.profile)
        transport = config.getoption("palace_transport")
        self.transports = TRANSPORTS if transport == "both" else (transport,)
        self.patterns: list[str] = list(config.getoption("palace_select"))
        self.op_timeout_ms = int(config.getoption("palace_op_timeout_ms"))
        if self.op_timeout_ms < 1:
            raise pytest.UsageError("--palace-op-timeout-ms: give 1 or more")
        roots = [Path(p) for p in config.getoption("palace_scenarios")]
        self.files: set[Path] = set()  # every scenario file of the catalogue, resolved
        self.scenarios = self._load(roots)
        self.by_path = {s.path.resolve(): s for s in self.scenarios}
        if not self._narrowed(config):
            from palace_conformance.scenarios.loader import scenarios_dir

            # no path among the arguments names a scenario: the whole catalogue is collected
            # beside what the arguments name, as pytest collects any other test file
            config.args.extend(str(r.resolve()) for r in roots or [scenarios_dir()])
        self.baseline = self._baseline(config.getoption("palace_baseline"))
        self.host: HostInfo | None = None
        self.detected: tuple[str, ...] | None = None  # capabilities observed (no one stated them)
        self.host_error: str | None = None
        self.cache: dict[tuple[str, str], ScenarioResult] = {}
        self.seen: list[dict[str, str]] = []
        self.baseline_lines: list[str] = []

    def _load(self, paths: list[Path]) -> list[Scenario]:
        from palace_conformance.scenarios.loader import discover, load_catalogue

        files, problems = discover(paths or None)
        if problems:
            raise pytest.UsageError(f"--palace-scenarios: {problems[0]}")
        self.files = {f.resolve() for f in files}
        if self.patterns:  # ids equal file names: skip validating what is not selected
            files = [f for f in files
                     if any(fnmatch.fnmatchcase(f.stem, p) for p in self.patterns)]
            if not files:
                raise pytest.UsageError(f"--palace-select {' '.join(self.patterns)}: no "
                                        "scenario id matches (see palace-conformance "
                                        "fixtures list)")
        catalogue = load_catalogue(files)
        if catalogue.problems:
            raise pytest.UsageError(f"{len(catalogue.problems)} problem(s) in the scenario "
                                    f"files, first: {catalogue.problems[0]} (palace-conformance "
                                    "fixtures validate)")
        return catalogue.scenarios

    def _baseline(self, path: str | None) -> BaselineFile | None:
        from palace_conformance.errors import RunUsageError
        from palace_conformance.runner.selection import load_baseline_arg

        try:
            baseline = load_baseline_arg(path, flag="--palace-baseline")
        except RunUsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        if baseline is None:
            return None
        baseline.add_known({s.id: s.transports for s in self.scenarios})
        return baseline

    # -- collection ----------------------------------------------------------------------------

    def _narrowed(self, config: pytest.Config) -> bool:
        """Whether the command line names a scenario file or a directory holding one (so the
        arguments choose the scenarios); a JSON file it names outside the catalogue is a usage
        error, not an empty run."""
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            return False  # testpaths or the current directory: the user named nothing
        found = False
        for arg in config.args:
            path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
            if path in self.files or (path.is_dir() and any(
                    f.is_relative_to(path) for f in self.files)):
                found = True
            elif path.suffix == ".json" and path.is_file():
                raise pytest.UsageError(f"{arg}: not a scenario of the catalogue (give its "
                                        "directory with --palace-scenarios)")
        return found

    def pytest_collect_file(self, file_path: Path,
                            parent: pytest.Collector) -> ScenarioFile | None:
        resolved = file_path.resolve()
        if resolved not in self.files:
            return None
        return ScenarioFile.from_parent(parent, path=file_path,
                                        scenario=self.by_path.get(resolved), suite=self)

    def items(self, parent: ScenarioFile, scenario: Scenario) -> Iterator[PalaceItem]:
        """The scenario on each transport it runs on here, then ``parity`` when both run."""
        from palace_conformance.runner.results import PARITY
        from palace_conformance.runner.verdict import parity

        xdist = self.config.pluginmanager.hasplugin("xdist")
        transports = [t for t in self.transports if t in scenario.transports]
        if len(transports) == 2 and parity.applies(scenario):
            transports.append(PARITY)
        for transport in transports:
            name = f"{scenario.id}[{transport}]"
            # the id alone is the node id, as before files were collectors: baselines, -k,
            # --deselect and CI histories keep naming items the same
            item = PalaceItem.from_parent(parent, name=name, nodeid=name, scenario=scenario,
                                          transport=transport, suite=self)
            # with -n N --dist loadgroup a scenario's items share a worker, so the
            # [parity] item reuses both runs instead of repeating them
            if xdist:
                item.add_marker(pytest.mark.xdist_group(scenario.id))
            yield item

    # -- running -------------------------------------------------------------------------------

    def _options(self) -> RunOptions:
        from palace_conformance.runner.execution.execute import RunOptions

        return RunOptions(host_argv=self.argv, op_timeout_ms=self.op_timeout_ms,
                          level=self.level, profile=self.profile,
                          detected_capabilities=self.detected)

    def _probe(self) -> HostInfo:
        """The host's hello, once per process; a placeholder capability list is replaced by
        what observing the bridge showed (runner/profiling/detect.py), once per process too."""
        from palace_conformance.runner.execution.suite import HostProbeError, probe_host
        from palace_conformance.runner.profiling.detect import detect, needs_detection
        from palace_conformance.runner.results import FROM_OBSERVATION

        if self.host is None and self.host_error is None:
            try:
                host = probe_host(self.argv)
            except HostProbeError as exc:
                self.host_error = f"the bridge host failed: {exc}"
            else:
                if needs_detection(host, self.profile):
                    found = detect(host, self._options(), self.transports)
                    host.capabilities, host.capabilities_note = found.capabilities, found.note
                    host.capabilities_source = FROM_OBSERVATION
                    self.detected = found.capabilities
                    # its observed channels, extras and names, unless a profile says them
                    self.profile = found.judged_profile(self.profile)
                self.host = host
        if self.host is None:
            raise PalaceFailure(self.host_error or "the bridge host failed")
        return self.host

    def result(self, scenario: Scenario, transport: str) -> ScenarioResult:
        """Run (once per process) and return the result; a parity item runs both sides."""
        from palace_conformance.runner.execution.execute import run_scenario
        from palace_conformance.runner.results import PARITY
        from palace_conformance.runner.verdict import parity

        key = (scenario.id, transport)
        if key in self.cache:
            return self.cache[key]
        if transport == PARITY:
            sides = [self.result(scenario, t) for t in TRANSPORTS]
            result = parity.compare(scenario, sides[0], sides[1], self.level)
        else:
            host = self._probe()
            result = run_scenario(scenario, transport, self._options(), host.capabilities)
        self.cache[key] = result
        return result

    def judge(self, result: ScenarioResult) -> None:
        from palace_conformance.runner.results import FAILURE_STATUSES, NOT_APPLICABLE

        if result.status == NOT_APPLICABLE:
            pytest.skip(result.reason)
        entry = self.baseline.entry_for(result) if self.baseline is not None else None
        if result.status in FAILURE_STATUSES:
            mark = self.baseline.mark(result) if self.baseline is not None else None
            if mark is not None:
                pytest.xfail(f"known failure (baseline): {mark.reason}")
            note = ""
            if entry is not None and entry.expires is not None:
                note = (f"baseline entry {entry.key} expired on {entry.expires.isoformat()}: "
                        "the failure counts again (fix it, or renew 'expires' with a reason)")
            raise PalaceFailure(_describe(result, note))
        if entry is not None and entry.transport == result.transport:
            raise PalaceFailure(f"{entry.key}: passes now; remove it from the baseline "
                                f"{self.baseline.source if self.baseline else ''}".rstrip())

    # -- what single items cannot judge: '*' entries and unknown ids ---------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == RESULT_PROPERTY and report.when == "call":
                self.seen.append(json.loads(str(value)))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.baseline is None or hasattr(self.config, "workerinput"):
            return  # an xdist worker: the controller sees every worker's reports
        from palace_conformance.runner.results import ScenarioResult
        from palace_conformance.runner.verdict.baseline import ANY_TRANSPORT, line_kind

        results = [ScenarioResult(scenario=s["scenario"], transport=s["transport"],
                                  status=s["status"]) for s in self.seen]  # type: ignore[arg-type]
        exact = {e.key for e in self.baseline.entries if e.transport != ANY_TRANSPORT}

        def per_item(line: str) -> bool:  # already reported by the item itself
            return (line.split(":", 1)[0] in exact and line_kind(line) != "unknown"
                    and "never runs on" not in line)

        self.baseline_lines = [line for line in self.baseline.stale(results)
                               if not per_item(line)]
        if self.baseline_lines and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Any:
        """Every report of a scenario item through the console's one redactor: the terminal and
        the JUnit XML are both written from it (a host's stderr in a reason, a skip, an xfail)."""
        from palace_conformance.redaction import CONSOLE

        outcome = yield
        report = outcome.get_result()
        if not isinstance(item, PalaceItem):
            return
        longrepr = report.longrepr
        if isinstance(longrepr, str):
            report.longrepr = CONSOLE.text(longrepr)
        elif isinstance(longrepr, tuple) and len(longrepr) == 3:
            report.longrepr = (longrepr[0], longrepr[1], CONSOLE.text(str(longrepr[2])))
        if isinstance(getattr(report, "wasxfail", None), str):
            report.wasxfail = CONSOLE.text(report.wasxfail)
        report.sections = [(key, CONSOLE.text(text)) for key, text in report.sections]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from palace_conformance.redaction import CONSOLE

        if self.host is not None and self.host.capabilities_note:  # xdist: in each skip reason
            terminalreporter.section("palace-conformance capabilities")
            terminalreporter.line(CONSOLE.text(self.host.capabilities_note))
        if self.baseline_lines:
            terminalreporter.section("palace-conformance baseline", red=True)
            for line in self.baseline_lines:
                terminalreporter.line(CONSOLE.text(line))

    def pytest_report_header(self, config: pytest.Config) -> str:
        return (f"palace-conformance: bridge {config.getoption('palace_bridge')}, "
                f"{len(self.scenarios)} scenario(s), transports {', '.join(self.transports)}")
