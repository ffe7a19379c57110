"""Which processes get the grace after the last step: decided from one look at each process.

`first_process_facts` answers the facts and whether only grandchildren are left in them. Asked
with two looks, a grandchild that ended between them was counted alive but got no grace, and
a clean bridge failed `alive_after_shutdown` (CI, 2026-12-07).
"""

from __future__ import annotations

from collections.abc import Callable

from palace_conformance.runner.execution.execute import first_process_facts

CHILD, GRANDCHILD = 101, 202
JOURNAL = [
    {"kind": "process_start", "transport": "stdio", "pid": CHILD},
    {"kind": "descendant_start", "pid": GRANDCHILD},
    {"kind": "process_exit", "pid": CHILD, "code": 0},
]


def dying_after(looks: int, pid: int, others: Callable[[int], bool]) -> Callable[[int], bool]:
    """A liveness probe that sees ``pid`` alive for its first ``looks`` looks, then gone."""
    seen = {"n": 0}

    def alive(asked: int) -> bool:
        if asked != pid:
            return others(asked)
        seen["n"] += 1
        return seen["n"] <= looks

    return alive


def test_a_grandchild_ending_between_looks_still_gets_its_grace() -> None:
    facts, only_descendants = first_process_facts(
        JOURNAL, [], dying_after(1, GRANDCHILD, lambda pid: False))
    assert facts["alive"] == 1 and only_descendants


def test_a_living_child_gets_no_descendant_grace() -> None:
    facts, only_descendants = first_process_facts(JOURNAL, [], lambda pid: True)
    assert facts["alive"] == 2 and not only_descendants


def test_another_servers_living_child_gets_none_either() -> None:
    aside = [{"kind": "process_start", "transport": "stdio", "pid": 303}]
    facts, only_descendants = first_process_facts(JOURNAL, aside,
                                                  lambda pid: pid in (GRANDCHILD, 303))
    assert facts["alive"] == 2 and not only_descendants


def test_nothing_alive_is_nothing_to_wait_for() -> None:
    facts, only_descendants = first_process_facts(JOURNAL, [], lambda pid: False)
    assert facts["alive"] == 0 and only_descendants
