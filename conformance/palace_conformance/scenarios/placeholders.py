"""``${NAME}`` placeholders: values only the runner knows (the fake's URL, its token, a temp dir).

A fixture names them; the runner expands them in every string of the scenario before it runs,
matchers included. Inside a ``$regex`` pattern the value is inserted escaped, so a temp path full of
dots still matches literally.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from palace_conformance import json_pointer
from palace_conformance.errors import UntrustedInputError
from palace_conformance.scenarios.model import PLACEHOLDERS

PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: placeholders that exist only when the scenario runs over HTTP
HTTP_ONLY = frozenset({"FAKE_URL", "FAKE_TOKEN"})


class PlaceholderError(UntrustedInputError, KeyError):
    """A placeholder with no value at expansion time."""

    def __str__(self) -> str:
        return str(self.args[0])


def names(text: str) -> list[str]:
    return PATTERN.findall(text)


def walk_strings(data: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every string value in ``data`` with its JSON pointer (keys are not expanded)."""
    if isinstance(data, str):
        yield where, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from walk_strings(value, f"{where}/{json_pointer.escape(key)}")
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from walk_strings(value, f"{where}/{index}")


def _substitute(text: str, values: Mapping[str, str], escape: bool) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise PlaceholderError(f"placeholder ${{{name}}} has no value here "
                                   f"(known: {', '.join(PLACEHOLDERS)})")
        return re.escape(values[name]) if escape else values[name]

    return PATTERN.sub(replace, text)


def expand(data: Any, values: Mapping[str, str], *, in_regex: bool = False) -> Any:
    """A copy of ``data`` with every ``${NAME}`` replaced (escaped inside ``$regex`` values)."""
    if isinstance(data, str):
        return _substitute(data, values, in_regex)
    if isinstance(data, dict):
        return {k: expand(v, values, in_regex=(k == "$regex")) for k, v in data.items()}
    if isinstance(data, list):
        return [expand(v, values) for v in data]
    return data
