"""The JSON Schemas of the format, and schema errors turned into one-line problems with a fix.

The schemas are the contract other runners read too, so the hints live in them: a subschema may
carry ``x-problem`` (a sentence, ``{value}`` is the offending value) and ``x-fix`` (what to do),
either as a string or keyed by the failing keyword. JSON Schema ignores unknown keywords, so any
validator can use the same files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from palace_conformance import json_pointer
from palace_conformance.resources import fixtures_dir

SCENARIO_SCHEMA = "scenario.schema.json"
FAULT_PLAN_SCHEMA = "fault-plan.schema.json"


@dataclass(frozen=True)
class SchemaProblem:
    pointer: str
    message: str
    fix: str


@cache
def load_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((fixtures_dir() / "schema" / name).read_text("utf-8"))
    return schema


@cache
def _registry() -> Registry:
    resources = []
    for name in (SCENARIO_SCHEMA, FAULT_PLAN_SCHEMA):
        schema = load_schema(name)
        resources.append((schema["$id"], Resource.from_contents(schema, DRAFT202012)))
    return Registry().with_resources(resources)


def _discriminant(subschema: Any) -> tuple[str, str] | None:
    """``(key, value)`` when ``subschema`` is exactly ``{"if": {"required": [key], "properties":
    {key: {"const": value}}}, "then": ...}`` with a string value: the "one branch per op" form."""
    if not isinstance(subschema, dict) or subschema.keys() != {"if", "then"}:
        return None
    condition = subschema["if"]
    if not isinstance(condition, dict) or condition.keys() != {"required", "properties"}:
        return None
    required, properties = condition["required"], condition["properties"]
    if not (isinstance(required, list) and len(required) == 1 and isinstance(properties, dict)
            and list(properties) == required):
        return None
    test = properties[required[0]]
    if not (isinstance(test, dict) and test.keys() == {"const"} and isinstance(test["const"], str)):
        return None
    return required[0], test["const"]


def _all_of(validator: Any, all_of: list[Any], instance: Any,
            schema: dict[str, Any]) -> Iterator[ValidationError]:
    """``allOf`` that skips, for an object, the discriminated branches whose ``if`` cannot hold.

    A step or a check is an ``allOf`` of one ``if``/``then`` per op (per check kind), so the
    stock keyword evaluates every ``if`` of every step; most of a catalogue's validation time
    went there. For an object, such an ``if`` holds exactly when the key is present and equals
    the string (JSON Schema ``const`` compares strings by ``==``), and a failed ``if`` without
    ``else`` yields nothing, so skipping it changes no error, path or order.
    """
    is_object = isinstance(instance, dict)
    for index, subschema in enumerate(all_of):
        if is_object:
            branch = _discriminant(subschema)
            if branch is not None and instance.get(branch[0]) != branch[1]:
                continue
        yield from validator.descend(instance, subschema, schema_path=index)


#: Draft 2020-12 with the faster ``allOf`` above; every other keyword is the stock one
FormatValidator: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, validators={"allOf": _all_of})


@cache
def validator(name: str = SCENARIO_SCHEMA) -> Validator:
    """The compiled validator of one schema, built once per process."""
    built: Validator = FormatValidator(load_schema(name), registry=_registry())
    return built


def pointer(path: Any) -> str:
    return json_pointer.join(path) or "/"


def _hint(schema: Any, key: str, keyword: str) -> str | None:
    if not isinstance(schema, dict):
        return None
    value = schema.get(key)
    if isinstance(value, dict):
        value = value.get(keyword)
    return value if isinstance(value, str) else None


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _generic(error: ValidationError) -> tuple[str, str]:
    keyword = error.validator
    value = error.validator_value
    if keyword == "required":
        missing = error.message.split("'")[1] if "'" in error.message else "a field"
        return f"missing required field '{missing}'", "add it"
    if keyword == "additionalProperties":
        properties = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        extra = sorted(set(cast("dict[str, Any]", error.instance)) - set(properties))
        allowed = ", ".join(properties) or "none"
        return (f"unknown field{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}",
                f"remove it or check the spelling; allowed here: {allowed}")
    if keyword == "enum":
        return (f"{_short(error.instance)} is not allowed here",
                "use one of: " + ", ".join(_short(v) for v in cast("list[Any]", value)))
    if keyword == "const":
        return f"{_short(error.instance)} is not allowed here", f"use {_short(value)}"
    if keyword == "type":
        wanted = " or ".join(value) if isinstance(value, list) else value
        return f"expected {wanted}, got {_short(error.instance)}", f"write a JSON {wanted}"
    if keyword == "pattern":
        return f"{_short(error.instance)} does not have the expected form", f"match {value}"
    if keyword in ("minimum", "maximum"):
        return error.message, f"use a value {'>=' if keyword == 'minimum' else '<='} {value}"
    if keyword in ("minItems", "minLength", "minProperties"):
        return "must not be empty", "add at least one"
    if keyword == "uniqueItems":
        return "has repeated items", "list each item once"
    return error.message, "see fixtures/README.md"


def _leaves(error: ValidationError) -> Iterator[ValidationError]:
    """The most specific errors: an ``if/then`` or ``$ref`` failure reports its causes; a
    ``oneOf``/``anyOf`` that no branch satisfies, and whose author wrote no message for it,
    reports the causes of the closest branch."""
    if error.validator in ("allOf", "$ref", "then", "else") and error.context:
        for sub in error.context:
            yield from _leaves(sub)
        return
    authored = _hint(error.schema, "x-problem", str(error.validator)) is not None
    closest = (_closest_branch(error)
               if error.validator in ("oneOf", "anyOf") and not authored else None)
    if closest:
        for sub in closest:
            yield from _leaves(sub)
        return
    yield error


def _closest_branch(error: ValidationError) -> list[ValidationError] | None:
    """The errors of the branch the author most likely meant: among branches that all failed,
    one whose required fields the object has (``{"env": ..., "unit": "sec"}`` meant the ``env``
    branch), then the one with the fewest errors. None when some branch had no error (the
    ``oneOf`` failed by matching twice) or the schema is not a list of branches."""
    branches = error.validator_value
    if not isinstance(branches, list) or not error.context:
        return None
    by_branch: dict[int, list[ValidationError]] = {}
    for sub in error.context:
        index = sub.relative_schema_path[0] if sub.relative_schema_path else None
        if isinstance(index, int):
            by_branch.setdefault(index, []).append(sub)
    if set(by_branch) != set(range(len(branches))):
        return None
    instance = error.instance

    def distance(index: int) -> tuple[int, int]:
        branch = branches[index]
        required = branch.get("required", []) if isinstance(branch, dict) else []
        has_them = isinstance(instance, dict) and bool(required) and all(
            key in instance for key in required)
        return (0 if has_them else 1, len(by_branch[index]))

    return by_branch[min(by_branch, key=distance)]


def schema_problems(data: Any, name: str = SCENARIO_SCHEMA) -> list[SchemaProblem]:
    """Every schema violation of ``data`` as (pointer, problem, fix), most specific first."""
    found: dict[tuple[str, str], SchemaProblem] = {}
    for top in validator(name).iter_errors(data):
        for error in _leaves(top):
            keyword = str(error.validator)
            template = _hint(error.schema, "x-problem", keyword)
            fix = _hint(error.schema, "x-fix", keyword)
            message, generic_fix = _generic(error)
            if template is not None:
                message = template.replace("{value}", _short(error.instance))
            # a value (or a key) may be megabytes: a message quotes at most a line of it
            problem = SchemaProblem(_cut(pointer(error.absolute_path), 200), _cut(message, 300),
                                    _cut(fix or generic_fix, 1000))
            found.setdefault((problem.pointer, problem.message), problem)
    return sorted(found.values(), key=lambda p: (p.pointer, p.message))
