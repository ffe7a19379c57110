"""The query 3.11's search embeds: its prompt-contamination guard (``sanitize_query``), modelled.

An agent sometimes sends its whole system prompt with the question. 3.11 passes a query of up to
200 characters (once stripped) through as it is. It cuts a longer one down to the last line
that reads as a question, else the last line of at least 10 characters, else the last 250
characters. A line still over 250 characters is cut to its last sentence that fits. The search
echoes the cut query and says how it was cut (``query_sanitized``, ``sanitizer``); the
CLI-compatible search refuses any query the guard would change.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any

#: a query this long or shorter (once stripped) is searched as it is
SAFE_LENGTH = 200
#: a cut query is at most this long
MAX_LENGTH = 250
#: a line or sentence shorter than this is not taken as the query
MIN_LENGTH = 10
_QUOTES = frozenset("'\"")
#: sentence ends, the ideographic full stop and the fullwidth ! and ? too
_SENTENCE_BREAK = "[.!?\u3002\uff01\uff1f\n]+"
_ENDS_AS_A_QUESTION = "[?\uff1f]\\s*[\"']?\\s*$"
_LONE_SURROGATE = r"[\ud800-\udfff]"


class CleanQuery:
    """What the guard made of a query: the text searched, how it was found, the input's length
    (stripped). A plain class, not a dataclass or a NamedTuple: every stdio fake start imports
    this module, and ``dataclasses`` (with ``inspect``) costs it about 12 ms of CPU, ``typing``
    about 4 ms."""

    __slots__ = ("method", "original_length", "text")

    def __init__(self, text: str, method: str, original_length: int) -> None:
        self.text = text
        self.method = method
        self.original_length = original_length

    @property
    def changed(self) -> bool:
        return self.method != "passthrough"

    def report(self) -> dict[str, Any]:
        """The keys 3.11 adds to a search's answer when the guard cut the query."""
        return {"query_sanitized": True,
                "sanitizer": {"method": self.method, "original_length": self.original_length,
                              "clean_length": len(self.text), "clean_query": self.text}}


def clean_query(raw: str) -> CleanQuery:
    """The guard's reading of ``raw``: a blank query as given; else stripped (a lone surrogate
    as U+FFFD) and, past :data:`SAFE_LENGTH`, cut to its question or its last line."""
    if not raw.strip():
        return CleanQuery(raw, "passthrough", len(raw))
    text = re.sub(_LONE_SURROGATE, "\ufffd", raw.strip())
    length = len(text)
    if length <= SAFE_LENGTH:
        return CleanQuery(text, "passthrough", length)
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    # 3.11 also looks for a '?' inside sentences split at '?': never found, so not modelled
    question = next((line for line in reversed(lines) if re.search(_ENDS_AS_A_QUESTION, line)),
                    None)
    if question is not None and len(question) >= MIN_LENGTH:
        cut = _shortened(question) if len(question) > MAX_LENGTH else question
        return CleanQuery(cut, "question_extraction", length)
    for line in reversed(lines):
        if len(line) >= MIN_LENGTH and len(cut := _shortened(line)) >= MIN_LENGTH:
            return CleanQuery(cut, "tail_sentence", length)
    return CleanQuery(text[-MAX_LENGTH:].strip(), "tail_truncation", length)


def _unquoted(text: str) -> str:
    """``text`` stripped of quotes that wrap it, then of a stray quote at either end."""
    text = text.strip()
    while len(text) >= 2 and text[0] in _QUOTES and text[0] == text[-1]:
        text = text[1:-1].strip()
        if not text:
            return ""
    if text[:1] in _QUOTES:
        text = text[1:].strip()
    if text[-1:] in _QUOTES:
        text = text[:-1].strip()
    return text


def _shortened(candidate: str) -> str:
    """A line unquoted and, when still over :data:`MAX_LENGTH`, its last sentence of a fitting
    length, else its last :data:`MAX_LENGTH` characters."""
    candidate = _unquoted(candidate)
    if len(candidate) <= MAX_LENGTH:
        return candidate
    sentences = [_unquoted(part) for part in re.split(_SENTENCE_BREAK, candidate) if part.strip()]
    fitting = (s for s in reversed(sentences) if MIN_LENGTH <= len(s) <= MAX_LENGTH)
    return next(fitting, candidate[-MAX_LENGTH:].strip())
