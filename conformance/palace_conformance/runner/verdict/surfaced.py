"""An error a bridge surfaced as an ``isError: true`` tool result, read as the error it reports.

Many bridges never throw from a tool: they hand the agent a result it can read, ``isError: true``
with what went wrong in its text (pi turns a thrown error into exactly such a result anyway). At
the ``core`` level that is an error surfaced to the agent, so a step expecting an error is judged
on the result (docs/choices.md, "Errors surfaced as isError results"):

- the message is the result's text (its text parts, joined), plus ``details.error.message``;
- the code is ``details.error.code``, else a JSON-RPC code (``-32xxx``) written in the text;
- the data is ``details.error.data``, else a JSON object written in the text;
- the kind is told by ``details.error`` (a ``kind``, a JSON-RPC ``code``, an HTTP ``status``),
  else by the text: a JSON-RPC code means ``tool_error``, then the same wording rules the Node
  hosts apply to a thrown error's message (``hosts/pi/lib/errors.mjs``). A text that tells
  nothing leaves the kind unknown, and the judge keeps the kind check as a seed-level note.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: details.error.data when the result carries none (distinct from a JSON null)
NO_DATA: Any = object()

_RPC_CODE = re.compile(r"(?<![\w.-])(-32[0-9]{3})(?![0-9])")
#: the wording rules of hosts/pi/lib/errors.mjs (BY_MESSAGE), first match wins; keep in step
WORDING_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), kind) for pattern, kind in (
        (r"requires? sign-in|requires? authentication|unauthori[sz]ed|forbidden|\b40[13]\b",
         "auth"),
        (r"failed to connect|unavailable|not available|is shut down|continuing without",
         "unavailable"),
        (r"timed? ?out|timeout|deadline exceeded", "timeout"),
        (r"session (has )?(expired|lost|not found|unknown)|re-?establish", "session_lost"),
        (r"connection closed|closed unexpectedly|ECONNRESET|ECONNREFUSED|EPIPE|socket hang up|"
         r"fetch failed|(child|server) (process )?exited|process exited|terminated",
         "connection_closed"),
        (r"\bHTTP\s*(\d{3})\b|status(?: code)?\s*(\d{3})", "http_error"),
        (r"protocol|invalid json|not valid json|unexpected token|content[- ]type|malformed",
         "protocol"),
    ))


@dataclass(frozen=True)
class SurfacedError:
    """What an ``isError`` result says about the error behind it."""

    message: str
    code: Any  # None when neither details nor text carry one
    data: Any  # NO_DATA when neither details nor text carry one
    kind: str | None  # None: the result does not tell
    told_by: str  # "details", "text" or "" (not told)

    def as_error(self) -> dict[str, Any]:
        """The driver-style error object (for reports)."""
        error: dict[str, Any] = {"kind": self.kind, "message": self.message,
                                 "surfaced_as": "is_error"}
        if self.code is not None:
            error["code"] = self.code
        if self.data is not NO_DATA:
            error["data"] = self.data
        return error


def surfaced_error(result: Any) -> SurfacedError | None:
    """The error an ``is_error: true`` call_tool result reports, or None for any other result."""
    if not isinstance(result, Mapping) or result.get("is_error") is not True:
        return None
    content = result.get("content")
    texts = [str(part.get("text")) for part in content
             if isinstance(part, Mapping) and isinstance(part.get("text"), str)] \
        if isinstance(content, list) else []
    text = "\n".join(texts)
    details = result.get("details")
    error = details.get("error") if isinstance(details, Mapping) else None
    error = error if isinstance(error, Mapping) else {}
    detail_message = error.get("message")
    message = text
    if isinstance(detail_message, str) and detail_message and detail_message not in text:
        message = f"{text}\n{detail_message}" if text else detail_message
    code = error.get("code") if _is_number(error.get("code")) else None
    if code is None and (found := _RPC_CODE.search(text)):
        code = int(found.group(1))
    data = error["data"] if "data" in error else _json_in(text)
    kind, told_by = _kind(error, message)
    return SurfacedError(message=message, code=code, data=data, kind=kind, told_by=told_by)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(error: Mapping[str, Any], message: str) -> tuple[str | None, str]:
    if isinstance(error.get("kind"), str) and error["kind"]:
        return str(error["kind"]), "details"
    if isinstance(error.get("code"), int) and not isinstance(error.get("code"), bool):
        return "tool_error", "details"
    status = error.get("status")
    if isinstance(status, int | float) and not isinstance(status, bool):
        if 200 <= status < 300:
            return "protocol", "details"
        return ("auth" if status in (401, 403) else "http_error"), "details"
    if _RPC_CODE.search(message):
        return "tool_error", "text"
    for pattern, kind in WORDING_RULES:
        if pattern.search(message):
            return kind, "text"
    return None, ""


def _json_in(text: str) -> Any:
    """The first JSON object written in ``text`` (e.g. ``... data: {"k": 1}``), or NO_DATA."""
    decoder = json.JSONDecoder()
    for start in (i for i, char in enumerate(text) if char == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return NO_DATA
