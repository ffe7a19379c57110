"""Which values are secrets, and how to take them out of text: shared by the runner's reports
and bundles and by the fake's live journal view.

It lives outside both because the fake may not import the runner (the import-linter contracts in
pyproject.toml), and the journal view must hide exactly what a report hides. Standard library
only: the fake's commands import it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: a variable or key whose upper-cased name contains one of these holds a secret
SECRET_NAME_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")
REDACTED = "<redacted>"
MARKER = "<redacted-secret-{n}>"
#: shorter values are not treated as secrets found in the environment: replacing "1" or "true"
#: everywhere would wreck the text while protecting nothing
MIN_ENV_SECRET = 8


def name_looks_secret(name: str) -> bool:
    """Whether a variable (or JSON key) called ``name`` holds a secret, by the report rules."""
    upper = name.upper()
    return any(word in upper for word in SECRET_NAME_WORDS)


def redact_env(env: Mapping[str, str | None]) -> dict[str, str | None]:
    """An environment fit for a report: secret-looking values replaced."""
    return {k: (REDACTED if v and name_looks_secret(k) else v) for k, v in env.items()}


def secret_named(name: str, value: str | None) -> bool:
    """Whether the report rules treat variable ``name`` as holding a secret."""
    return bool(value) and name_looks_secret(name)


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Secret-looking variables of this process's environment (inherited by every child)."""
    environ = os.environ if environ is None else environ
    return sorted({v for k, v in environ.items()
                   if secret_named(k, v) and len(v) >= MIN_ENV_SECRET and not v.isdigit()})


class Redactor:
    """Replaces every known secret by its numbered marker in text and JSON values."""

    def __init__(self, values: Iterable[str]) -> None:
        ordered: list[str] = []
        for value in values:
            if value and value not in ordered:
                ordered.append(value)
        self.markers = {value: MARKER.format(n=i + 1) for i, value in enumerate(ordered)}
        # longest first, so a secret that contains another is replaced whole
        self._order = sorted(self.markers, key=len, reverse=True)
        # each secret as written and as JSON escapes it, in one pass over a text (a whole run's
        # result is tens of thousands of strings: one regex each, not two replaces per secret)
        self._found: dict[str, str] = {}
        for value in self._order:
            self._found.setdefault(value, self.markers[value])
            self._found.setdefault(json.dumps(value)[1:-1], self.markers[value])
        self._pattern = re.compile("|".join(
            re.escape(v) for v in sorted(self._found, key=len, reverse=True))) \
            if self._found else None

    def text(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda match: self._found[match.group(0)], text)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def leaks(self, text: str) -> list[str]:
        """Markers of the secrets still present in ``text`` (empty when clean)."""
        return [self.markers[v] for v in self._order if v in text]
