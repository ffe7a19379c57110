"""The stateful sequences of ``fidelity --generated --sequences``: drawn the same for a seed,
every start state reached, later steps naming earlier answers, each target filling those
references from its own answers, and two fake runs differing only where the rules say."""

from __future__ import annotations

from pathlib import Path

from palace_conformance.fidelity.compare import compare_records
from palace_conformance.fidelity.execute import MISSING_REF, answer_at, run_script
from palace_conformance.fidelity.generated import http_sessions, sequence_sessions
from palace_conformance.fidelity.http_requests import draw_http
from palace_conformance.fidelity.normalise import load_rules, normalise, parse_rules
from palace_conformance.fidelity.script import Script
from palace_conformance.fidelity.sequences import (
    STARTS,
    Sequence,
    draw_sequences,
    load_sequences,
    shorter,
)
from palace_conformance.fidelity.strategies import load_tools
from palace_conformance.fidelity.targets import fake_target
from palace_conformance.real.embedding import running_stub


def test_the_same_seed_draws_the_same_sequences_from_every_start() -> None:
    first = draw_sequences(60, 3)
    assert first == draw_sequences(60, 3) and first != draw_sequences(60, 4)
    assert {seq.start for seq in first} == set(STARTS)
    names = {tool["name"] for tool in load_tools()}
    assert all(step.tool in names for seq in first for step in seq.steps)
    # later steps read back what earlier ones filed, by reference
    refs = [value for seq in first for step in seq.steps for value in step.arguments.values()
            if isinstance(value, str) and value.startswith("${ref:")]
    assert refs, "some steps name an earlier answer"


def test_a_reference_is_filled_from_the_targets_own_answer() -> None:
    answers = {"seq.x.add_drawer.s00": {"replies": [{"result": {"content": [
        {"json": {"drawer_id": "drawer_a_b_1", "chunk_ids": ["c0", "c1"]}}]}}]}}
    assert answer_at(answers, "s00", "drawer_id") == "drawer_a_b_1"
    assert answer_at(answers, "s00", "chunk_ids.1") == "c1"
    assert answer_at(answers, "s00", "missing") == MISSING_REF
    assert answer_at(answers, "s07", "drawer_id") == MISSING_REF


def test_shorter_drops_one_earlier_step_or_every_later_one() -> None:
    seq = draw_sequences(5, 1)[0]
    keep = seq.steps[1].label
    candidates = shorter(seq, keep)
    assert all(candidate.steps[-1].label == keep for candidate in candidates)
    assert all(len(candidate.steps) <= 2 for candidate in candidates)


def test_regression_sequences_round_trip() -> None:
    for case in load_sequences():
        seq = Sequence.from_json(case)
        assert seq.start in STARTS and seq.steps and case["class"] and case["why"]
        assert Sequence.from_json(seq.to_json()) == seq


def test_an_unordered_rule_sorts_a_ranking_but_not_other_lists() -> None:
    rules = parse_rules({"rules": [{"id": "rank", "kind": "unordered", "keys": ["results"],
                                    "item_keys": ["distance"], "masks": "m", "why": "w"}]})
    ranked = {"results": [{"id": "b", "distance": "<SCORE>"}, {"id": "a", "distance": "<SCORE>"}]}
    plain = {"results": [{"id": "b"}, {"id": "a"}]}
    shown, fired = normalise(ranked, rules)
    assert [item["id"] for item in shown["results"]] == ["a", "b"] and fired == {"rank"}
    assert normalise(plain, rules) == (plain, set())


def test_two_fake_runs_of_sequences_differ_only_where_the_rules_say(tmp_path: Path) -> None:
    sequences = [(f"seq.t.{index:02d}", seq) for index, seq in enumerate(draw_sequences(6, 2))]
    sessions, steps_of = sequence_sessions(sequences)
    with running_stub() as url:
        first = run_script(Script(tuple(sessions)),
                           fake_target(tmp_path / "one" / "shims", url), tmp_path / "one")
        second = run_script(Script(tuple(sessions)),
                            fake_target(tmp_path / "two-longer" / "shims", url),
                            tmp_path / "two-longer")
    assert set(steps_of) <= set(first["points"])
    result = compare_records(first, second, load_rules(), set(steps_of))
    assert [v.id for v in result.differences] == [], list(result.lines())
    assert len(result.verdicts) == len(steps_of)


def test_http_requests_are_drawn_the_same_for_a_seed_over_methods_paths_and_auth() -> None:
    drawn = draw_http(45, 7, 20)
    assert drawn == draw_http(45, 7, 20) and [len(reqs) for _, reqs in drawn] == [20, 20, 5]
    requests = [spec for _, reqs in drawn for spec in reqs]
    assert {spec["method"] for spec in requests} >= {"POST", "GET"}
    assert {spec["path"] for spec in requests} >= {"/mcp", "/healthz"}
    assert any(spec.get("auth") == "none" for spec in requests)
    assert all(not spec["path"].startswith(("/statusz", "/logstream", "/sync"))
               for spec in requests)
    sessions, points = http_sessions([("http.t.000", True, requests[:3])])
    assert sessions[0].transport == "http" and sessions[0].token is not None
    assert points == {"http.t.000.000.http", "http.t.000.001.http", "http.t.000.002.http"}
