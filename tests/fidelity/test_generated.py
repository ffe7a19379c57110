"""``fidelity --generated`` without the real server: the generator is seeded and reaches every
tool, the classes and the shrinker behave, and two fake runs of the generated sessions differ
only where the rules say (the differ's calibration: a difference it reports is the servers')."""

from __future__ import annotations

from pathlib import Path

from palace_conformance.fidelity.compare import compare_records
from palace_conformance.fidelity.execute import run_script
from palace_conformance.fidelity.generated import (
    class_of,
    load_cases,
    load_open,
    sessions_for,
    simpler,
)
from palace_conformance.fidelity.normalise import load_rules
from palace_conformance.fidelity.strategies import draw_calls, load_tools
from palace_conformance.fidelity.targets import fake_target
from palace_conformance.real.embedding import running_stub


def test_the_same_seed_draws_the_same_calls_over_every_tool() -> None:
    first, again = draw_calls(60, 3), draw_calls(60, 3)
    assert first == again
    assert draw_calls(60, 4) != first
    assert len(first) == 60
    # the first 47 are one round: one call of each tool
    assert {tool for tool, _ in first[:47]} == {tool["name"] for tool in load_tools()}
    waits = [arguments for tool, arguments in draw_calls(470, 5)
             if tool == "mempalace_event_wait"]
    assert waits and all(0 <= a["timeout_ms"] <= 50 for a in waits)


def test_generated_paths_stay_inside_the_world() -> None:
    for _, arguments in draw_calls(470, 11):
        for key in ("source", "project_dir", "source_file"):
            value = arguments.get(key)
            if isinstance(value, str) and value:
                assert value.startswith("${SOURCE}") or value == "missing-dir", value


def test_a_class_drops_list_indices_and_names_the_tool() -> None:
    diff = [(".replies[0].result.content[0].json.error", "a", "b"),
            (".replies[0].result.content[1].json.error", "a", None)]
    assert (class_of("mempalace_kg_query", diff)
            == "kg_query: .replies[].result.content[].json.error")


def test_simpler_leaves_out_keys_and_shrinks_values() -> None:
    candidates = list(simpler({"wing": "  probe  ", "ids": ["a", "bbbbbbbbbbbb"], "n": 7}))
    assert {"ids": ["a", "bbbbbbbbbbbb"], "n": 7} in candidates
    assert {"wing": "probe", "ids": ["a", "bbbbbbbbbbbb"], "n": 7} in candidates
    assert {"wing": "  probe  ", "ids": ["a"], "n": 7} in candidates
    assert {"wing": "  probe  ", "ids": ["a", "bbbbbbbbbbbb"], "n": 1} in candidates
    assert list(simpler({})) == []


def test_regression_cases_are_calls_of_listed_tools() -> None:
    names = {tool["name"] for tool in load_tools()}
    for case in load_cases():
        assert case["tool"] in names and isinstance(case["arguments"], dict)
        assert case["class"] and case["why"], case


def test_two_fake_runs_of_generated_calls_differ_only_where_the_rules_say(
        tmp_path: Path) -> None:
    calls = [(f"gen.t.{index}", call) for index, call in enumerate(draw_calls(47, 2))]
    script = sessions_for(calls, "gen", batch=47)
    with running_stub() as url:
        first = run_script(script, fake_target(tmp_path / "one" / "shims", url),
                           tmp_path / "one")
        second = run_script(script, fake_target(tmp_path / "two-longer" / "shims", url),
                            tmp_path / "two-longer")
    assert {point for point, _ in calls} <= set(first["points"])
    assert not any("skipped" in seen for seen in first["points"].values())
    result = compare_records(first, second, load_rules(), {point for point, _ in calls})
    assert [v.id for v in result.differences] == [], list(result.lines())
    assert len(result.verdicts) == 47


def test_known_open_classes_cover_their_tool_only(tmp_path: Path) -> None:
    # every class found at issue scale is fixed or explained by a rule: the shipped list is
    # empty, and an entry still covers its own tool's paths only
    assert load_open() == [], "generated_open.json: every known class is fixed or ruled"
    listed = tmp_path / "open.json"
    listed.write_text('{"open": [{"id": "dup", "tool": "mempalace_check_duplicate", '
                      '"match": "matches", "why": "an example"}]}', encoding="utf-8")
    duplicate, = load_open(listed)
    assert duplicate.covers("check_duplicate: .replies[].result.content[].json.matches.length")
    assert not duplicate.covers("search: .replies[].result.content[].json.matches.length")
    assert not duplicate.covers("check_duplicate: .replies[].result.content[].json.error")
