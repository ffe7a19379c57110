"""Matcher diagnostics and properties; the cases every runner must reproduce are data in
fixtures/runner-tests/matchers.json (tests/runner/test_runner_tests.py runs them)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palace_conformance.scenarios.matching import (
    MatcherError,
    check_matcher,
    matches,
    problems,
    why_not,
)

RECORD = {
    "kind": "recv", "method": "tools/call", "tool": "mempalace_search", "pid": 41, "t": 12.5,
    "message": {"id": 3, "params": {"name": "mempalace_search",
                                    "arguments": {"query": "alpha beta", "limit": 5}}},
    "tags": ["a", "b", {"deep": True}], "empty": None,
}


def test_why_not_names_the_failing_pointer() -> None:
    reason = why_not({"message": {"params": {"arguments": {"limit": 7}}}}, RECORD)
    assert reason is not None and "/message/params/arguments/limit" in reason
    assert "expected 7" in reason and "got 5" in reason
    assert why_not({"kind": "recv"}, RECORD) is None


@pytest.mark.parametrize(("matcher", "fragment"), [
    ({"a": {"$bogus": 1}}, "unknown matcher operator '$bogus'"),
    ({"a": {"$regex": "("}}, "bad $regex"),
    ({"$regex": "x", "plain": 1}, "mixes operator keys"),
    ({"a": {"$exists": "yes"}}, "$exists needs true or false"),
    ({"a": {"$in": 3}}, "$in needs an array"),
    ({"a": {"$gte": "3"}}, "$gte needs a number"),
    ({"a": {"$all": []}}, "$all needs a non-empty array"),
    ({"a": {"$not": {"$nope": 1}}}, "unknown matcher operator '$nope'"),
])
def test_problems_are_reported(matcher: Any, fragment: str) -> None:
    found = list(problems(matcher))
    assert found and fragment in found[0][1]
    with pytest.raises(MatcherError):
        check_matcher(matcher)


def test_a_good_matcher_has_no_problems() -> None:
    assert list(problems({"a": {"$all": [{"$regex": "^x"}, {"$not": {"$in": [1, 2]}}]}})) == []


def test_unknown_operator_fails_loudly_at_match_time() -> None:
    with pytest.raises(MatcherError):
        matches({"a": {"$bogus": 1}}, {"a": 1})


# --- properties ------------------------------------------------------------------------------

_keys = st.text(alphabet="abcdefgh_", min_size=1, max_size=4)
_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(alphabet="xyz ", max_size=4)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(json_values)
def test_every_value_matches_itself_and_its_eq(value: Any) -> None:
    assert matches(value, value)
    assert matches({"$eq": value}, value)
    assert not matches({"$not": {"$eq": value}}, value)
    assert matches({"$in": [value]}, value)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_keys, json_values, min_size=1, max_size=5), st.data())
def test_any_subset_of_a_record_matches_it(record: dict[str, Any], data: st.DataObject) -> None:
    keys = data.draw(st.lists(st.sampled_from(sorted(record)), unique=True))
    assert matches({k: record[k] for k in keys}, record)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_keys, json_values, max_size=4), json_values)
def test_a_key_the_record_lacks_never_matches_a_value(record: dict[str, Any], value: Any) -> None:
    absent = "zz_absent"
    assert not matches({absent: value}, record)
    assert matches({absent: {"$exists": False}}, record)
    assert matches({absent: {"$not": value}}, record)


@settings(max_examples=60, deadline=None)
@given(json_values, json_values)
def test_not_is_negation_and_all_any_compose(matcher_value: Any, value: Any) -> None:
    plain = matches(matcher_value, value)
    assert matches({"$not": matcher_value}, value) is (not plain)
    assert matches({"$all": [matcher_value, {}]}, value) is (plain and isinstance(value, dict))
    assert matches({"$any": [matcher_value, {"$not": matcher_value}]}, value)


@settings(max_examples=60, deadline=None)
@given(st.integers(-100, 100), st.integers(-100, 100))
def test_range_operators_agree_with_arithmetic(bound: int, value: int) -> None:
    assert matches({"$gte": bound}, value) is (value >= bound)
    assert matches({"$gt": bound}, value) is (value > bound)
    assert matches({"$lte": bound}, value) is (value <= bound)
    assert matches({"$lt": bound}, value) is (value < bound)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="abc", max_size=8), st.text(alphabet="abc", max_size=3))
def test_contains_on_strings_is_substring(text: str, part: str) -> None:
    assert matches({"$contains": part}, text) is (part in text)
