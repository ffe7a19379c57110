"""The options a fake server starts with (command line or the environment a bridge passes on),
every environment variable the fake reads, and the brain built from them.

The bridge, not the runner, spawns a stdio child, so everything a scenario wants from the child
travels in environment variables: ``PALACE_FAKE_PLAN`` (fault plan file), ``PALACE_FAKE_FAULT``
(compact specs separated by ``;``), ``PALACE_FAKE_JOURNAL`` (journal file) and
``PALACE_FAKE_STATE`` (palace contents shared by every process of a scenario), and
``PALACE_FAKE_CATALOGUE`` (which server to be: ``full`` ``mempalace-mcp`` or ``light``
``mempalace-light-mcp``; the light shim and ``python -m mempalace.mcp_light_server`` choose
``light`` themselves), and ``PALACE_FAKE_PRESET`` (a named preset's faults, before any other;
a shim installed with ``--preset`` sets it unless the environment already does).
"""

from __future__ import annotations

import os

from palace_conformance.fake.brain import Brain
from palace_conformance.fake.faults import (
    FakeSetupError,
    FaultPlan,
    check_transport,
    load_plan,
    parse_compact,
)
from palace_conformance.fake.journal import Journal
from palace_conformance.fake.lease import Lease, default_palace_path
from palace_conformance.fake.palace import PalaceStore
from palace_conformance.resources import CATALOGUES

ENV_PLAN = "PALACE_FAKE_PLAN"
ENV_FAULT = "PALACE_FAKE_FAULT"
ENV_JOURNAL = "PALACE_FAKE_JOURNAL"
ENV_STATE = "PALACE_FAKE_STATE"
ENV_CATALOGUE = "PALACE_FAKE_CATALOGUE"  # full (default) or light: the tools and serverInfo
ENV_PRESET = "PALACE_FAKE_PRESET"  # a named preset (fixtures/fake-presets.json)
#: set by a run whose bridge runs several servers (profile ``servers``): the catalogue the
#: scenario's faults are for; a fake serving another catalogue takes none of them
ENV_FAULTS_FOR = "PALACE_FAKE_FAULTS_FOR"
ENV_ARGV0 = "PALACE_FAKE_ARGV0"  # set by shims so the lock holder reads like the real script
WATCH_ENV = "PALACE_FAKE_WATCH_PID"  # an HTTP fake stops when this process is gone
# read by the HTTP fake, with the real ``mempalace serve``'s names
TOKEN_ENV = "MEMPALACE_MCP_HTTP_TOKEN"
WRITER_WAIT_ENV = "MEMPALACE_MCP_WRITER_WAIT_SECONDS"
EXTRA_HOSTS_ENV = "MEMPALACE_MCP_EXTRA_ALLOWED_HOSTS"
SYNC_INTERVAL_ENV = "MEMPALACE_SYNC_INTERVAL"  # the HTTP server's peer sync (only its log line)

__all__ = ["ENV_ARGV0", "ENV_CATALOGUE", "ENV_FAULT", "ENV_FAULTS_FOR", "ENV_JOURNAL", "ENV_PLAN",
           "ENV_PRESET",
           "ENV_STATE",
           "EXTRA_HOSTS_ENV", "SYNC_INTERVAL_ENV", "TOKEN_ENV", "WATCH_ENV", "WRITER_WAIT_ENV",
           "FakeOptions",
           "FakeSetupError", "build_brain", "load_fault_plan"]


class FakeOptions:
    """Where the fake gets its plan, faults (and a named preset's), journal, palace state and
    palace path, and which catalogue it serves."""

    def __init__(self, plan: str | None = None, faults: list[str] | None = None,
                 journal: str | None = None, state: str | None = None,
                 palace: str | None = None, catalogue: str | None = None,
                 preset: str | None = None) -> None:
        self.plan = plan
        self.preset = preset
        self.faults: list[str] = list(faults or [])
        self.journal = journal
        self.state = state
        self.palace = palace
        self.catalogue = catalogue

    def __repr__(self) -> str:
        return (f"FakeOptions(plan={self.plan!r}, faults={self.faults!r}, "
                f"journal={self.journal!r}, state={self.state!r}, palace={self.palace!r}, "
                f"catalogue={self.catalogue!r}, preset={self.preset!r})")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> FakeOptions:
        env = dict(os.environ if env is None else env)
        specs = [s for s in env.get(ENV_FAULT, "").split(";") if s.strip()]
        return cls(plan=env.get(ENV_PLAN) or None, faults=specs,
                   journal=env.get(ENV_JOURNAL) or None, state=env.get(ENV_STATE) or None,
                   catalogue=env.get(ENV_CATALOGUE) or None,
                   preset=env.get(ENV_PRESET) or None)

    def merged(self, other: FakeOptions) -> FakeOptions:
        """Command-line values win over the environment; fault specs add up."""
        return FakeOptions(plan=self.plan or other.plan, faults=[*other.faults, *self.faults],
                           journal=self.journal or other.journal, state=self.state or other.state,
                           palace=self.palace or other.palace,
                           catalogue=self.catalogue or other.catalogue,
                           preset=self.preset or other.preset)


def load_fault_plan(options: FakeOptions, transport: str | None = None) -> FaultPlan:
    """The preset's faults, the plan file's, then the ``--fault`` specs; a spec typed for this
    fake (``transport`` given) must be able to fire on its transport."""
    plan = FaultPlan()
    if options.preset:
        from palace_conformance.fake.presets import find_preset

        preset = find_preset(options.preset)
        plan.faults.extend(preset.parsed(transport) if transport else preset.parsed(
            preset.transports[0]))
    if options.plan:
        plan.faults.extend(load_plan(options.plan).faults)
    for index, spec in enumerate(options.faults):
        fault = parse_compact(spec.strip(), index)
        if transport is not None:
            check_transport(fault, transport, f"--fault {spec.strip()!r}")
        plan.faults.append(fault)
    return plan


def build_brain(options: FakeOptions, transport: str) -> Brain:
    """A ready brain; :class:`FakeSetupError` (one printable line) for any unusable input."""
    catalogue = options.catalogue or "full"
    if catalogue not in CATALOGUES:
        raise FakeSetupError(f"unknown catalogue {catalogue!r} (--catalogue or {ENV_CATALOGUE}); "
                             f"use one of {', '.join(CATALOGUES)}")
    plan = load_fault_plan(options, transport)
    faults_for = os.environ.get(ENV_FAULTS_FOR) or None
    if faults_for is not None and faults_for != catalogue:
        plan = FaultPlan()  # the scenario's faults are the other server's
    palace = os.path.abspath(options.palace) if options.palace else default_palace_path()
    try:
        journal = Journal(options.journal, transport)
    except OSError as exc:
        raise FakeSetupError(f"cannot open journal {options.journal}: {exc.strerror or exc}; "
                             "pass a writable --journal path") from None
    try:
        if options.state:
            store = PalaceStore(options.state)
        else:  # started by hand: as the real server would start in this HOME
            from palace_conformance.fake.disk_state import state_on_disk

            store = PalaceStore(initial=state_on_disk(palace))
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise FakeSetupError(f"cannot use palace state file {options.state}: {reason}; "
                             "fix or delete it") from None
    return Brain(transport=transport, plan=plan, journal=journal, store=store,
                 lease=Lease(palace), catalogue=catalogue, faults_for=faults_for)
