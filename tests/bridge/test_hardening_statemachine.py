"""Issue 13, the evidence part: random interleavings of calls, events and faults on both transports
(``bridge_machine`` says what is driven and which invariants hold after every step).

Two profiles: ``ci`` (the default, a bounded run in the normal suite) and ``long`` (select it with
``PALACE_SM_PROFILE=long``; BENCHMARKS.md records a run). ``PALACE_SM_STATS=PREFIX`` writes what a
run did (examples, steps, faults, invariant checks) to ``PREFIX.<transport>.json``; it is printed
either way (``-s``). The long profile also runs the machine against mutants of the reference
bridge, each of which it must catch: the proof that its invariants can fail.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from palace_conformance.selftest.mutants import find, resolve

from .bridge_machine import TOKEN, BridgeMachine, HttpMachine, StdioMachine, Tally
from .support import HttpFake

PROFILES = {
    "ci": {"max_examples": 12, "stateful_step_count": 10},
    "long": {"max_examples": 150, "stateful_step_count": 30},
}
ENV_PROFILE = "PALACE_SM_PROFILE"
ENV_STATS = "PALACE_SM_STATS"
QUIET = [HealthCheck.too_slow, HealthCheck.filter_too_much]
MACHINES: dict[str, type[BridgeMachine]] = {"stdio": StdioMachine, "http": HttpMachine}


def profile_name() -> str:
    name = os.environ.get(ENV_PROFILE, "ci")
    if name not in PROFILES:
        raise pytest.UsageError(f"{ENV_PROFILE}={name!r} is not a profile; use one of "
                                f"{', '.join(PROFILES)}")
    return name


@pytest.fixture
def machine(request: pytest.FixtureRequest, tmp_path: Path
            ) -> Iterator[tuple[str, type[BridgeMachine], Tally]]:
    """A machine class bound to this test's directory (and, for HTTP, its own fake server);
    ``request.param`` names the transport."""
    transport = request.param
    tally = Tally()
    context: dict[str, Any] = {"base": tmp_path, "tally": tally, "counter": [0]}
    fake = HttpFake(tmp_path, sessions=True, token=TOKEN) if transport == "http" else None
    if fake is not None:
        context["fake"] = fake
    base = MACHINES[transport]
    try:
        yield transport, type(base.__name__, (base,), context), tally
    finally:
        if fake is not None:
            fake.close()


@pytest.mark.parametrize("machine", sorted(MACHINES), indirect=True)
def test_the_bridge_holds_its_invariants_under_random_faults(machine) -> None:
    transport, bound, tally = machine
    run_state_machine_as_test(bound, settings=settings(
        deadline=None, database=None, suppress_health_check=QUIET, **PROFILES[profile_name()]))
    record(transport, tally)
    assert tally.examples >= PROFILES[profile_name()]["max_examples"] // 2
    assert tally.calls > 0 and tally.faults_armed > 0 and tally.invariant_checks > 0
    if transport == "stdio":
        assert tally.spawns > 0


def record(transport: str, tally: Tally) -> None:
    figures = {"transport": transport, "profile": profile_name(),
               "max_steps": PROFILES[profile_name()]["stateful_step_count"], **tally.to_json()}
    print(json.dumps(figures))
    prefix = os.environ.get(ENV_STATS)
    if prefix:
        Path(f"{prefix}.{transport}.json").write_text(json.dumps(figures, indent=2))


#: mutants of the reference bridge the machine must catch, each breaking one invariant's rule
CAUGHT = {
    "stdio": ["stdio-respawn-unbounded", "stdio-timed-out-child-not-killed",
              "wake-failure-escapes"],
    "http": ["http-5xx-replayed", "http-token-in-debug-log", "http-404-retried-twice"],
}


@pytest.mark.skipif(os.environ.get(ENV_PROFILE) != "long",
                    reason=f"mutant runs take minutes each; {ENV_PROFILE}=long runs them")
@pytest.mark.parametrize(("machine", "mutant"),
                         [(t, name) for t, names in sorted(CAUGHT.items()) for name in names],
                         indirect=["machine"])
def test_the_machine_catches_a_broken_bridge(machine, monkeypatch: pytest.MonkeyPatch,
                                             mutant: str) -> None:
    """The same machine against a mutant finds a breach (no shrinking: finding one is the point).
    Minutes per mutant on a busy machine, hence the long profile only."""
    _, bound, tally = machine
    for patch in find(mutant).patches:
        owner, attribute, original = resolve(patch)
        monkeypatch.setattr(owner, attribute, patch.make(original))
    with pytest.raises(Exception) as breach:  # whichever invariant catches it
        run_state_machine_as_test(bound, settings=settings(
            deadline=None, database=None, max_examples=300, stateful_step_count=12,
            phases=[Phase.generate], report_multiple_bugs=False, suppress_health_check=QUIET))
    print(f"{mutant}: caught after {tally.examples} examples: "
          f"{str(breach.value).splitlines()[0][:160]}")
