"""Which values are secrets, and how to take them out of text: shared by the runner's reports,
bundles and per-run copies (``--report-dir``'s ``runs/``) and by the fake's live journal view.

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
#: an encoded form (:func:`encoded_forms`) shorter than this is not replaced: it could match
#: ordinary text by chance
MIN_ENCODED_FORM = 8


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


def encoded_forms(value: str) -> list[str]:
    """How ``value`` reads once something encoded it: percent-encoded (a URL component, a form
    value) and inside base64 (both alphabets, at each of the three byte offsets, without the
    edge characters that its neighbours' bits share), e.g. in ``Authorization: Basic``. Forms
    equal to ``value`` or shorter than :data:`MIN_ENCODED_FORM` are left out."""
    import base64  # here, not at module level: the fake's commands import this module
    from urllib.parse import quote, quote_plus

    forms = [quote(value, safe=""), quote_plus(value)]
    data = value.encode("utf-8", "surrogatepass")
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            chars = encode(b"\x00" * shift + data).decode("ascii")
            forms.append(chars[-(-shift * 8 // 6):(shift + len(data)) * 8 // 6])
    return [form for form in dict.fromkeys(forms)
            if form != value and len(form) >= MIN_ENCODED_FORM]


class Redactor:
    """Replaces every known secret by its numbered marker in text and JSON values, as written,
    JSON-escaped and in its :func:`encoded_forms`."""

    def __init__(self, values: Iterable[str]) -> None:
        ordered: list[str] = []
        for value in values:
            if value and value not in ordered:
                ordered.append(value)
        self.markers = {value: MARKER.format(n=i + 1) for i, value in enumerate(ordered)}
        # longest first, so a secret that contains another is replaced whole
        self._order = sorted(self.markers, key=len, reverse=True)
        # each secret as written, as JSON escapes it and encoded, in one pass over a text (a
        # whole run's result is tens of thousands of strings: one regex each, not a replace per
        # form and secret)
        self._found: dict[str, str] = {}
        self._forms: dict[str, list[str]] = {}
        for value in self._order:
            forms = [value, json.dumps(value)[1:-1], *encoded_forms(value)]
            self._forms[value] = forms
            for form in forms:
                self._found.setdefault(form, self.markers[value])
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
        return [self.markers[v] for v in self._order
                if any(form in text for form in self._forms[v])]


def _placeholder_only(value: str) -> bool:
    return bool(re.fullmatch(r"\$\{[A-Z_]+\}", value))


def scenario_secrets(raw: Mapping[str, Any]) -> list[str]:
    """Secret literals a scenario file states, in the order they appear (placeholders skipped)."""
    found: list[str] = []

    def add(value: Any) -> None:
        if isinstance(value, str) and value and not _placeholder_only(value) \
                and value not in found:
            found.append(value)

    http = raw.get("http")
    if isinstance(http, Mapping):
        add(http.get("token"))
    for name, value in (raw.get("env") or {}).items():
        if isinstance(value, str) and secret_named(str(name), value):
            add(value)
    for step in raw.get("steps") or ():
        if isinstance(step, Mapping) and step.get("action") == "rotate_token":
            add(step.get("token"))
    expect = raw.get("expect")
    if isinstance(expect, Mapping):
        for value in expect.get("wire_secrets") or ():
            add(value)
    return found
