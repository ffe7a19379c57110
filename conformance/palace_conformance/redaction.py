"""Which values are secrets, and how to take them out of text: shared by the runner's reports,
bundles and per-run copies (``--report-dir``'s ``runs/``) and by the fake's live journal view.

It lives outside both because the fake may not import the runner (the import-linter contracts in
pyproject.toml), and the journal view must hide exactly what a report hides. Standard library
only: the fake's commands import it.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

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


#: strings shaped like a credential whoever printed them (a recorded palace's answer, a host's
#: stderr): the kind each shape is named by in a note, and its pattern
TOKEN_SHAPES: tuple[tuple[str, str], ...] = (
    ("github token", r"\bgh[pousr]_[A-Za-z0-9]{30,255}\b"),
    ("github token", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"),
    ("api key", r"\bsk-[A-Za-z0-9][A-Za-z0-9_-]{15,255}"),
    ("slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,255}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{0,4096}"),
    ("bearer value", r"(?<=Bearer )[A-Za-z0-9._~+/=-]{20,4096}"),
)
SHAPE_MARKER = "<redacted-token>"
_SHAPES = re.compile("|".join(f"(?P<s{i}>{pattern})"
                              for i, (_, pattern) in enumerate(TOKEN_SHAPES)))
#: every shape's match starts where one of these starts (``Bearer ``: just after it), so only
#: those places are tried: ``_SHAPES.sub`` tries every character of the text against six
#: patterns whose leading ``\b`` and look-behind defeat the regex engine's prefix scan, about 1 s
#: per MB; ``str.find`` for these is some 50 times quicker (a catalogue run's results are 20 MB)
SHAPE_STARTS = ("gh", "github_pat_", "sk-", "xox", "eyJ")
SHAPE_AFTER = "Bearer "


def _high_entropy(value: str) -> bool:
    """A bearer value that reads like a random credential (not ``Bearer placeholder-token``)."""
    if len(value) < 20:
        return False
    counts = {c: value.count(c) for c in set(value)}
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= 3.5 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def mask_token_shapes(text: str) -> tuple[str, list[str]]:
    """``text`` with every token-shaped string (:data:`TOKEN_SHAPES`) replaced by
    :data:`SHAPE_MARKER`, and the kinds masked (one per replacement, in order)."""
    kinds: list[str] = []

    def one(match: re.Match[str]) -> str:
        index = int((match.lastgroup or "s0")[1:])
        kind = TOKEN_SHAPES[index][0]
        if kind == "bearer value" and not _high_entropy(match.group(0)):
            return match.group(0)
        kinds.append(kind)
        return SHAPE_MARKER

    pieces: list[str] = []
    done = 0  # the text before this is in pieces; as re.sub, a match resumes the scan after it
    for start in _shape_starts(text):
        if start < done:
            continue
        match = _SHAPES.match(text, start)  # \b and look-behind still see text[:start]
        if match is None:
            continue
        pieces += (text[done:start], one(match))
        done = match.end()
    if not pieces:
        return text, kinds
    pieces.append(text[done:])
    return "".join(pieces), kinds


def _shape_starts(text: str) -> list[int]:
    """Every index at which a :data:`TOKEN_SHAPES` match may start, ascending (a superset)."""
    found: set[int] = set()
    for literal, offset in (*((s, 0) for s in SHAPE_STARTS), (SHAPE_AFTER, len(SHAPE_AFTER))):
        at = text.find(literal)
        while at != -1:
            found.add(at + offset)
            at = text.find(literal, at + 1)
    return sorted(found)


class Redactor:
    """Replaces every known secret by its numbered marker in text and JSON values, as written,
    JSON-escaped and in its :func:`encoded_forms`; with ``shapes``, token-shaped strings too
    (:func:`mask_token_shapes`)."""

    def __init__(self, values: Iterable[str], *, shapes: bool = False) -> None:
        self.shapes = shapes
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
            escaped = json.dumps(value)[1:-1]
            # JSON-escaped once (a JSON text) and twice (that text inside a JSON string, e.g. a
            # host's stderr line quoting JSON, in a result file)
            forms = [value, escaped, json.dumps(escaped)[1:-1], *encoded_forms(value)]
            self._forms[value] = forms
            for form in forms:
                self._found.setdefault(form, self.markers[value])
        self._pattern = _alternation(self._found)

    def text(self, text: str) -> str:
        pattern = self._pattern
        if pattern is not None and len(text) >= LONG_TEXT:
            # a long text (a whole run's results) holds few of the forms, if any: the regex
            # engine tries every form at every character, ``bytes.find`` looks for one form at
            # memory speed, so only the forms present are looked for (the same matches: a form
            # that is absent matches nowhere)
            data = text.encode("utf-8", "surrogatepass")
            present = [form for form in self._found
                       if form.encode("utf-8", "surrogatepass") in data]
            pattern = _alternation(present) if len(present) < len(self._found) else pattern
        if pattern is not None:
            text = pattern.sub(lambda match: self._found[match.group(0)], text)
        if self.shapes:
            text = mask_token_shapes(text)[0]
        return text

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


#: a text at least this long is searched for the forms present first (:meth:`Redactor.text`)
LONG_TEXT = 1 << 16


def _alternation(forms: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern matching any of ``forms``, the longest first (a secret that contains another
    is replaced whole); None for none."""
    ordered = sorted(forms, key=len, reverse=True)
    return re.compile("|".join(re.escape(form) for form in ordered)) if ordered else None


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
    env = raw.get("env")  # any shape: this reads files before they are validated
    for name, value in (env.items() if isinstance(env, Mapping) else ()):
        if isinstance(value, str) and secret_named(str(name), value):
            add(value)
    steps = raw.get("steps")
    for step in (steps if isinstance(steps, list) else ()):
        if isinstance(step, Mapping) and step.get("action") == "rotate_token":
            add(step.get("token"))
    expect = raw.get("expect")
    if isinstance(expect, Mapping):
        wire = expect.get("wire_secrets")
        for value in (wire if isinstance(wire, list) else ()):
            add(value)
    return found


class RedactingWriter(io.TextIOBase):
    """A console stream that passes every complete line through a :class:`Redactor` (a line is
    held until its end, or until it passes 64 KiB, so a secret split across writes is still
    found); everything else is the wrapped stream's."""

    HOLD = 64 * 1024

    def __init__(self, stream: TextIO, redactor: Redactor) -> None:
        super().__init__()
        self.stream = stream
        self.redactor = redactor
        self._held = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._held += text
            cut = self._held.rfind("\n") + 1
            if not cut and len(self._held) > self.HOLD:
                cut = len(self._held)
            if cut:
                out, self._held = self._held[:cut], self._held[cut:]
                self.stream.write(_encodable(self.redactor.text(out)))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._held:
                out, self._held = self._held, ""
                self.stream.write(_encodable(self.redactor.text(out)))
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8") or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.stream, "errors", None)


class ConsoleRedaction:
    """The one redactor between a command and its console: the runner's environment secrets,
    token shapes, and whatever secrets a command learns as it reads its inputs (:meth:`add`)."""

    def __init__(self) -> None:
        self._values: list[str] = []
        self.redactor = Redactor(environment_secrets(), shapes=True)

    def add(self, values: Iterable[str]) -> None:
        fresh = [v for v in values if v and v not in self._values]
        if fresh:
            self._values.extend(fresh)
            self.redactor = Redactor([*self._values, *environment_secrets()], shapes=True)
            for stream in (sys.stdout, sys.stderr):
                if isinstance(stream, RedactingWriter):
                    stream.redactor = self.redactor

    def install(self) -> None:
        """Wrap ``sys.stdout`` and ``sys.stderr`` (once)."""
        if not isinstance(sys.stdout, RedactingWriter):
            sys.stdout = RedactingWriter(sys.stdout, self.redactor)
        if not isinstance(sys.stderr, RedactingWriter):
            sys.stderr = RedactingWriter(sys.stderr, self.redactor)

    def text(self, text: str) -> str:
        return self.redactor.text(text)


#: the console's redactor for this process (the CLI installs it; the pytest plugin uses it)
CONSOLE = ConsoleRedaction()


def _encodable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (a lone surrogate from an untrusted file's
    ``\\ud800`` escape) written as its escape, so a console line never raises."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
