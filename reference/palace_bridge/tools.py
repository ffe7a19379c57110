"""What the palace offers and returns, as plain data: tool specs and tool results.

Schemas are passed through untouched (TOOL-01: the seed's "Type.Unsafe" lesson: an LLM that cannot
see the real parameter names guesses them wrong). Results keep everything the server sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import PalaceProtocolError


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ToolSpec:
        schema = data.get("inputSchema")
        annotations = data.get("annotations")
        description = data.get("description")
        return cls(
            name=data["name"],
            description=description if isinstance(description, str) else "",
            input_schema=schema if isinstance(schema, dict) else {"type": "object"},
            annotations=annotations if isinstance(annotations, dict) else None,
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "description": self.description,
                                "inputSchema": self.input_schema}
        if self.annotations is not None:
            data["annotations"] = self.annotations
        return data


@dataclass(frozen=True)
class ToolResult:
    """A ``tools/call`` result; ``is_error`` results are results, not exceptions (TOOL-03)."""

    content: list[dict[str, Any]]
    is_error: bool = False
    structured: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The first text block's text ("" when there is none)."""
        for block in self.content:
            text = block.get("text")
            if block.get("type") == "text" and isinstance(text, str):
                return text
        return ""

    @classmethod
    def from_wire(cls, result: Any) -> ToolResult:
        if not isinstance(result, dict):
            raise PalaceProtocolError(f"tools/call result is not an object: {str(result)[:120]}")
        content = result.get("content", [])
        if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
            raise PalaceProtocolError("tools/call result has no valid 'content' list")
        structured = result.get("structuredContent")
        return cls(content=content, is_error=result.get("isError") is True,
                   structured=structured if isinstance(structured, dict) else None, raw=result)
