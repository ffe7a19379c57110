"""The narrow interfaces the features depend on, so each can be tested with in-memory fakes.

``PalaceCaller`` is the slice of ``palace_bridge.client.PalaceClient`` a feature uses. Time comes
from ``palace_bridge.clock.Clock`` (``now_ms``), the same injectable clock the client's policy uses.
"""

from __future__ import annotations

import json
from typing import Any, Protocol


class ToolResultLike(Protocol):
    """What a palace tool call returns (``palace_bridge.client.ToolResult``)."""

    @property
    def content(self) -> list[dict[str, Any]]: ...

    @property
    def is_error(self) -> bool: ...

    @property
    def text(self) -> str: ...


class PalaceCaller(Protocol):
    """Calls one palace tool; raises ``palace_bridge.errors.PalaceError`` on failure."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None, *,
                        timeout_ms: int | None = None) -> ToolResultLike: ...


def parse_json_text(result: ToolResultLike) -> Any:
    """The JSON object inside a result's text (mempalace answers pretty-printed JSON), or None."""
    try:
        return json.loads(result.text)
    except (TypeError, ValueError):
        return None


def failed(result: ToolResultLike) -> bool:
    """A tool result that did not do its job: ``isError``, a ``{"success": false}`` body, or an
    ``{"error": ...}`` body without ``success: true`` (how mempalace 3.11 answers reads it could
    not serve, such as a fresh palace's ``"Chroma database missing"``)."""
    if result.is_error:
        return True
    body = parse_json_text(result)
    if not isinstance(body, dict):
        return False
    return body.get("success") is False or ("error" in body and body.get("success") is not True)
