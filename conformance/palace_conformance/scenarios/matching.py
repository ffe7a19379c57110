"""Matchers: language-neutral JSON data that says which records an assertion is about.

A fixture never holds code, so "a ``recv`` of ``mempalace_search`` whose ``limit`` is at least 5"
is written as data and every runner (this one, a TypeScript one) must read it the same way:

* a scalar matches an equal JSON value (numbers by value; a boolean is never a number);
* an array matches an array of the same length, element by element;
* an object with plain keys matches an object that has every key, each value matching
  (a deep subset: extra keys in the record are fine);
* an object of ``$`` operators matches when every operator holds; the operators are
  ``$eq $regex $contains $exists $in $gte $gt $lte $lt $not $all $any``.

A key the record lacks matches only ``{"$exists": false}`` (or a ``$not`` of something that needs
the key). This module needs nothing beyond the standard library on purpose: it is the reference
a port to another language is compared with.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any

from palace_conformance import json_pointer
from palace_conformance.errors import UntrustedInputError

OPERATORS: tuple[str, ...] = (
    "$eq", "$regex", "$contains", "$exists", "$in", "$keys", "$gte", "$gt", "$lte", "$lt", "$not",
    "$all",
    "$any",
)


class MatcherError(UntrustedInputError, ValueError):
    """A matcher that cannot be evaluated (unknown operator, bad argument); says what to fix."""


class _Missing:
    """The value of a key a record does not have."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def is_operator_object(matcher: Any) -> bool:
    return isinstance(matcher, dict) and bool(matcher) and all(
        isinstance(k, str) and k.startswith("$") for k in matcher
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def json_equal(left: Any, right: Any) -> bool:
    """Equality as JSON means it: 1 == 1.0, true != 1, objects and arrays compared deeply."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True))
    return type(left) is type(right) and bool(left == right)


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise MatcherError(f"bad $regex {pattern!r}: {exc}") from None


def matches(matcher: Any, value: Any) -> bool:
    """Whether ``value`` (a JSON value; :data:`MISSING` for an absent key) is matched."""
    if isinstance(matcher, dict):
        if is_operator_object(matcher):
            return all(_operator(op, arg, value) for op, arg in matcher.items())
        if not isinstance(value, dict):
            return False
        return all(matches(sub, value.get(key, MISSING)) for key, sub in matcher.items())
    if value is MISSING:
        return False
    if isinstance(matcher, list):
        return (isinstance(value, list) and len(value) == len(matcher)
                and all(matches(m, v) for m, v in zip(matcher, value, strict=True)))
    return json_equal(matcher, value)


def _operator(op: str, arg: Any, value: Any) -> bool:
    if op == "$not":
        return not matches(arg, value)
    if op == "$all":
        return all(matches(m, value) for m in arg)
    if op == "$any":
        return any(matches(m, value) for m in arg)
    if op == "$exists":
        return (value is not MISSING) == bool(arg)
    if value is MISSING:
        return False
    if op == "$eq":
        return json_equal(arg, value)
    if op == "$regex":
        return isinstance(value, str) and _regex(arg).search(value) is not None
    if op == "$contains":
        if isinstance(value, str):
            return isinstance(arg, str) and arg in value
        if isinstance(value, list):
            return any(matches(arg, item) for item in value)
        return False
    if op == "$in":
        return any(json_equal(candidate, value) for candidate in arg)
    if op == "$keys":
        return isinstance(value, dict) and all(key in arg for key in value)
    if op in ("$gte", "$gt", "$lte", "$lt"):
        if not _is_number(value):
            return False
        return bool({"$gte": value >= arg, "$gt": value > arg, "$lte": value <= arg,
                     "$lt": value < arg}[op])
    raise MatcherError(f"unknown matcher operator {op!r}; use one of: {', '.join(OPERATORS)}")


def _short(value: Any, limit: int = 80) -> str:
    if value is MISSING:
        return "nothing (key absent)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def why_not(matcher: Any, value: Any, where: str = "") -> str | None:
    """``None`` when ``value`` matches, else the first reason it does not, with a JSON pointer."""
    if matches(matcher, value):
        return None
    at = where or "/"
    if isinstance(matcher, dict) and not is_operator_object(matcher):
        if not isinstance(value, dict):
            return f"at {at}: expected an object, got {_short(value)}"
        for key, sub in matcher.items():
            escaped = json_pointer.escape(key)
            reason = why_not(sub, value.get(key, MISSING), f"{where}/{escaped}")
            if reason is not None:
                return reason
    if isinstance(matcher, list) and isinstance(value, list) and len(value) == len(matcher):
        for index, (sub, item) in enumerate(zip(matcher, value, strict=True)):
            reason = why_not(sub, item, f"{where}/{index}")
            if reason is not None:
                return reason
    return f"at {at}: expected {_short(matcher)}, got {_short(value)}"


def problems(matcher: Any, where: str = "") -> Iterator[tuple[str, str, str]]:
    """``(pointer, problem, fix)`` for everything that makes ``matcher`` unusable."""
    if isinstance(matcher, list):
        for index, item in enumerate(matcher):
            yield from problems(item, f"{where}/{index}")
        return
    if not isinstance(matcher, dict):
        return
    dollar = [k for k in matcher if k.startswith("$")]
    if dollar and len(dollar) != len(matcher):
        yield (where or "/", "a matcher object mixes operator keys ($...) with plain keys",
               "put the operators under the key they test")
        return
    if not dollar:
        for key, sub in matcher.items():
            yield from problems(sub, f"{where}/{json_pointer.escape(key)}")
        return
    for op, arg in matcher.items():
        at = f"{where}/{op}"
        if op not in OPERATORS:
            yield at, f"unknown matcher operator {op!r}", f"use one of: {', '.join(OPERATORS)}"
        elif op == "$regex":
            if not isinstance(arg, str):
                yield at, "$regex needs a string pattern", "write the pattern as a string"
            else:
                try:
                    _regex(arg)
                except MatcherError as exc:
                    yield at, str(exc), "write a valid regular expression"
        elif op == "$exists" and not isinstance(arg, bool):
            yield at, "$exists needs true or false", "write true or false"
        elif op == "$in" and not isinstance(arg, list):
            yield at, "$in needs an array of values", "write the values as an array"
        elif op == "$keys" and not (isinstance(arg, list)
                                    and all(isinstance(k, str) for k in arg)):
            yield at, "$keys needs an array of key names", "write the allowed keys as strings"
        elif op in ("$gte", "$gt", "$lte", "$lt") and not _is_number(arg):
            yield at, f"{op} needs a number", "write a number"
        elif op in ("$all", "$any"):
            if not isinstance(arg, list) or not arg:
                yield at, f"{op} needs a non-empty array of matchers", "write an array of matchers"
            else:
                for index, sub in enumerate(arg):
                    yield from problems(sub, f"{at}/{index}")
        elif op in ("$not", "$contains"):
            yield from problems(arg, at)


def check_matcher(matcher: Any) -> None:
    """Raise :class:`MatcherError` with the first problem, for matchers built in code."""
    for where, problem, fix in problems(matcher):
        raise MatcherError(f"{where}: {problem} ({fix})")
