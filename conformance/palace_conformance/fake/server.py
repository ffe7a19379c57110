"""Builds a fake server from its options (command line or the environment a bridge passes on).

The bridge, not the runner, spawns a stdio child, so everything a scenario wants from the child
travels in environment variables: ``PALACE_FAKE_PLAN`` (fault plan file), ``PALACE_FAKE_FAULT``
(compact specs separated by ``;``), ``PALACE_FAKE_JOURNAL`` (journal file) and
``PALACE_FAKE_STATE`` (palace contents shared by every process of a scenario).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .brain import Brain
from .faults import FaultPlan, load_plan, parse_compact
from .journal import Journal
from .lease import Lease, default_palace_path
from .palace import PalaceStore

ENV_PLAN = "PALACE_FAKE_PLAN"
ENV_FAULT = "PALACE_FAKE_FAULT"
ENV_JOURNAL = "PALACE_FAKE_JOURNAL"
ENV_STATE = "PALACE_FAKE_STATE"


@dataclass
class FakeOptions:
    plan: str | None = None
    faults: list[str] = field(default_factory=list)
    journal: str | None = None
    state: str | None = None
    palace: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> FakeOptions:
        env = dict(os.environ if env is None else env)
        specs = [s for s in env.get(ENV_FAULT, "").split(";") if s.strip()]
        return cls(plan=env.get(ENV_PLAN) or None, faults=specs,
                   journal=env.get(ENV_JOURNAL) or None, state=env.get(ENV_STATE) or None)

    def merged(self, other: FakeOptions) -> FakeOptions:
        """Command-line values win over the environment; fault specs add up."""
        return FakeOptions(plan=self.plan or other.plan, faults=[*other.faults, *self.faults],
                           journal=self.journal or other.journal, state=self.state or other.state,
                           palace=self.palace or other.palace)


def load_fault_plan(options: FakeOptions) -> FaultPlan:
    plan = load_plan(options.plan) if options.plan else FaultPlan()
    for index, spec in enumerate(options.faults):
        plan.faults.append(parse_compact(spec.strip(), index))
    return plan


def build_brain(options: FakeOptions, transport: str) -> Brain:
    plan = load_fault_plan(options)
    palace = os.path.abspath(options.palace) if options.palace else default_palace_path()
    return Brain(transport=transport, plan=plan, journal=Journal(options.journal, transport),
                 store=PalaceStore(options.state), lease=Lease(palace))
