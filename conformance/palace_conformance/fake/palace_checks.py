"""What the fake palace's tool handlers share (:mod:`.palace`, :mod:`.palace_graph`,
:mod:`.palace_records`): mempalace 3.11's argument checks and their wording, its answer for a
chroma database that does not exist yet, and the short stable digests that make ids."""

from __future__ import annotations

import re
from collections.abc import Mapping

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:  # datetime is imported where used, as hashlib: neither is needed by a
    from datetime import datetime  # fake that files nothing, together about 6 ms of its start
    from typing import Any

NAME_MAX = 128
CONTENT_MAX = 100_000
#: the patterns are kept as text: ``re`` compiles (and caches) one on first use, so a fake that
#: checks no name or date never compiles them at start
_SAFE_NAME = r"^(?:[^\W_]|[^\W_][\w .'-]{0,126}[^\W_])$"


def argument_problem(field: str, value: Any, rule: str) -> str | None:
    """What 3.11 says of one argument, checked on its stripped value, or None when it passes.

    ``rule`` is ``text`` (any non-blank string), ``content`` (a drawer's or diary entry's text:
    also at most 100,000 characters and no NUL, unstripped), ``value`` (a knowledge-graph subject or
    object: also at most 128 characters, no NUL) or ``name`` (wing, room, topic, agent_name, a
    predicate: also no path characters, and letters or digits at both ends with only word
    characters, space, ``.``, ``'`` and ``-`` between)."""
    if not isinstance(value, str) or not value.strip():
        return f"{field} must be a non-empty string"
    if rule == "content":
        if len(value) > CONTENT_MAX:
            return f"{field} exceeds maximum length of {CONTENT_MAX} characters"
        return f"{field} contains null bytes" if "\x00" in value else None
    value = value.strip()
    if rule == "text":
        return None
    if len(value) > NAME_MAX:
        return f"{field} exceeds maximum length of {NAME_MAX} characters"
    if rule == "name" and (".." in value or "/" in value or "\\" in value):
        return f"{field} contains invalid path characters"
    if "\x00" in value:
        return f"{field} contains null bytes"
    if rule == "name" and not re.match(_SAFE_NAME, value):
        return f"{field} contains invalid characters"
    return None


def refusal(*checks: tuple[str, Any, str]) -> dict[str, Any] | None:
    """The first failing ``(field, value, rule)`` check as 3.11's result, or None."""
    for field, value, rule in checks:
        if (problem := argument_problem(field, value, rule)) is not None:
            return {"success": False, "error": problem}
    return None


_ISO_DATE = r"^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])$"
_ISO_UTC = (r"^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
            r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:Z|\+00:00)$")


def temporal(args: dict[str, Any], *fields: str) -> str | None:
    """3.11's check of the knowledge graph's dates (``as_of``, ``valid_from``, ``valid_to``,
    ``ended``, ``at``): absent or ``""`` pass, else a full date or a UTC date-time (``+00:00``
    becomes ``Z``, written back into ``args``); the problem text of the first that fails."""
    for field in fields:
        value = args.get(field)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            return f"{field} must be a string"
        value = value.strip()
        from datetime import datetime

        try:
            if re.match(_ISO_DATE, value):
                datetime.strptime(value, "%Y-%m-%d")
            elif re.match(_ISO_UTC, value):
                datetime.fromisoformat(value.replace("Z", "+00:00"))
            else:
                raise ValueError(value)
        except ValueError:
            return (f"{field}={value!r} is not a valid ISO-8601 date or UTC datetime "
                    "(expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ)")
        args[field] = value[:-6] + "Z" if value.endswith("+00:00") else value
    return None


def checked_fact(args: dict[str, Any], objects: tuple[str, ...],
                 dates: tuple[str, ...]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """3.11's checks of a knowledge-graph fact's arguments (its subject, predicate, the named
    objects, then the named dates): the refusal to answer, or None, and the arguments stripped
    and their dates normalised."""
    refused = refusal(("subject", args["subject"], "value"),
                      ("predicate", args["predicate"], "name"),
                      *((name, args[name], "value") for name in objects))
    if refused is not None:
        return refused, args
    args = stripped(args, "subject", "predicate", *objects)
    if (problem := temporal(args, *dates)) is not None:
        return {"success": False, "error": problem}, args
    return None, args


def stripped(args: dict[str, Any], *fields: str) -> dict[str, Any]:
    """``args`` with the named string fields stripped, as 3.11's sanitisers return them once
    they pass (a wing, room, KG subject, predicate or object, an agent or topic name): what
    is filed, answered and matched later is the stripped text."""
    return {**args, **{field: args[field].strip() for field in fields
                       if isinstance(args.get(field), str)}}


def chroma_missing(palace: str) -> dict[str, Any]:
    """What 3.11 answers a read that opens the chroma database before any vector write."""
    return {"error": "Chroma database missing",
            "details": f"Could not open missing database at {palace}/chroma.sqlite3.",
            "hint": "Run: mempalace status or mempalace repair-status for diagnostics.",
            "backend": "chroma"}


def sha256_hex(text: str) -> str:
    """The SHA-256 of ``text`` (UTF-8), in hex."""
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def digest(*parts: str, size: int = 12) -> str:
    return sha256_hex("\x1f".join(parts))[:size]


def date_bound(value: Any, field: str) -> tuple[datetime | None, str | None]:
    """3.11's ``since``/``before`` bound: absent or blank is none, a non-string or what
    ``datetime.fromisoformat`` refuses (a trailing ``Z`` dropped) is the problem text; an
    offset is dropped for a wall-clock comparison."""
    if value is None:
        return None, None
    if not isinstance(value, str):
        return None, f"{field} must be an ISO date string"
    value = value.strip()
    if not value:
        return None, None
    from datetime import datetime

    try:
        parsed = datetime.fromisoformat(value[:-1] if value.endswith(("Z", "z")) else value)
    except ValueError:
        return None, (f"{field} must be an ISO date string (e.g. '2026-04-01' or "
                      f"'2026-04-01T09:30:00'), got {value!r}")
    return parsed.replace(tzinfo=None), None


def date_window(args: Mapping[str, Any]) -> tuple[datetime | None, datetime | None] | str:
    """3.11's ``since``/``before`` window of a listing or a search (:func:`date_bound` each):
    the two bounds, or the problem text (a bad bound, or ``since`` not before ``before``)."""
    bounds = []
    for field in ("since", "before"):
        bound, problem = date_bound(args.get(field), field)
        if problem is not None:
            return problem
        bounds.append(bound)
    since, before = bounds
    if since is not None and before is not None and since >= before:
        return f"since ({args['since']!r}) must be earlier than before ({args['before']!r})"
    return since, before


def in_window(filed_at: str, since: datetime | None, before: datetime | None) -> bool:
    """A drawer filed in ``[since, before)`` (3.11: inclusive since, exclusive before)."""
    if since is None and before is None:
        return True
    filed, _ = date_bound(filed_at, "filed_at")
    return filed is not None and (since is None or filed >= since) and (
        before is None or filed < before)
