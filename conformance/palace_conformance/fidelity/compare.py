"""Compare two recorded observation sets point by point, under the declared rules.

A point is *same* when both raw observations are equal, *explained* when they differ but agree
once every rule is applied (the report names the rules), and a *difference* otherwise, shown
as its id and the first differing JSON paths. A point one side never recorded is a difference.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from palace_conformance.fidelity.normalise import Rule, normalise

SHOWN_PATHS = 4
VALUE_WIDTH = 90
_ABSENT = "<absent>"
_RECORDED = "<recorded>"


@dataclass
class PointVerdict:
    id: str
    section: str
    status: str  # same | explained | different
    rules: list[str] = field(default_factory=list)
    diff: list[tuple[str, Any, Any]] = field(default_factory=list)


@dataclass
class Comparison:
    verdicts: list[PointVerdict]
    left: str = "real"
    right: str = "fake"

    def count(self, status: str) -> int:
        return sum(1 for verdict in self.verdicts if verdict.status == status)

    @property
    def differences(self) -> list[PointVerdict]:
        return [verdict for verdict in self.verdicts if verdict.status == "different"]

    def totals_line(self) -> str:
        return (f"{len(self.verdicts)} points compared, {self.count('explained')} explained by "
                f"rules, {self.count('different')} differences")

    def lines(self) -> Iterator[str]:
        """Per difference its id and a compact diff, then the totals."""
        for verdict in self.differences:
            yield f"DIFF {verdict.id} [{verdict.section}]"
            for path, left, right in verdict.diff[:SHOWN_PATHS]:
                yield (f"    {path or '.'}: {self.left} {_short(left)} | "
                       f"{self.right} {_short(right)}")
            if len(verdict.diff) > SHOWN_PATHS:
                yield f"    ... {len(verdict.diff) - SHOWN_PATHS} more differing paths"
        yield self.totals_line()

    def to_json(self) -> dict[str, Any]:
        return {"totals": {"points": len(self.verdicts), "same": self.count("same"),
                           "explained": self.count("explained"),
                           "differences": self.count("different")},
                "points": {v.id: {"section": v.section, "status": v.status, "rules": v.rules,
                                  "diff": [{"path": p, self.left: a, self.right: b}
                                           for p, a, b in v.diff]}
                           for v in self.verdicts}}


def _short(value: Any) -> str:
    text = value if value in (_ABSENT, _RECORDED) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= VALUE_WIDTH else text[:VALUE_WIDTH - 1] + "…"


def json_diff(left: Any, right: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every differing leaf as (JSON path, left, right); a missing key shows ``<absent>``."""
    if type(left) is not type(right):
        yield path, left, right
    elif isinstance(left, dict):
        for key in list(left) + [k for k in right if k not in left]:
            where = f"{path}.{key}"
            if key not in left or key not in right:
                yield where, left.get(key, _ABSENT), right.get(key, _ABSENT)
            else:
                yield from json_diff(left[key], right[key], where)
    elif isinstance(left, list):
        if len(left) != len(right):
            yield f"{path}.length", len(left), len(right)
        for index, (a, b) in enumerate(zip(left, right, strict=False)):
            yield from json_diff(a, b, f"{path}[{index}]")
    elif left != right:
        yield path, left, right


def _bare(observation: dict[str, Any]) -> dict[str, Any]:
    """What is compared: everything but the bookkeeping (session, section)."""
    return {k: v for k, v in observation.items() if k not in ("session", "section")}


def compare_records(left: dict[str, Any], right: dict[str, Any], rules: list[Rule],
                    only: set[str] | None = None) -> Comparison:
    """Compare two ``run_script`` records (``left`` usually the real server's); ``only``
    restricts the comparison to those point ids (a --quick or --select run)."""
    verdicts: list[PointVerdict] = []
    ids = list(left["points"]) + [p for p in right["points"] if p not in left["points"]]
    for point_id in ids:
        if only is not None and point_id not in only:
            continue
        a, b = left["points"].get(point_id), right["points"].get(point_id)
        section = (a or b or {}).get("section", "")
        if a is None or b is None:
            verdicts.append(PointVerdict(point_id, section, "different", diff=[
                ("(point)", _RECORDED if a else _ABSENT, _RECORDED if b else _ABSENT)]))
            continue
        raw_a, raw_b = _bare(a), _bare(b)
        if raw_a == raw_b:
            verdicts.append(PointVerdict(point_id, section, "same"))
            continue
        norm_a, fired_a = normalise(raw_a, rules, left.get("worlds", {}).get(a.get("session")))
        norm_b, fired_b = normalise(raw_b, rules, right.get("worlds", {}).get(b.get("session")))
        if norm_a == norm_b:
            verdicts.append(PointVerdict(point_id, section, "explained",
                                         rules=sorted(fired_a | fired_b)))
        else:
            verdicts.append(PointVerdict(point_id, section, "different",
                                         diff=list(json_diff(norm_a, norm_b))))
    return Comparison(verdicts, left.get("target", "real"), right.get("target", "fake"))
