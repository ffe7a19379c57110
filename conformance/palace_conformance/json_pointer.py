"""JSON Pointer (RFC 6901) tokens, escaped and unescaped in one place: ``~`` is ``~0`` and ``/``
is ``~1``, and unescaping undoes ``~1`` before ``~0`` so ``~01`` stays ``~1``."""

from __future__ import annotations

from collections.abc import Iterable


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def join(path: Iterable[str | int]) -> str:
    """The pointer for a path of keys and indexes; ``""`` (the whole document) for no path."""
    return "".join("/" + escape(str(part)) for part in path)
