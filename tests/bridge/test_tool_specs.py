"""The reference's own choice for a listed tool that carries no usable inputSchema (MCP requires
one; no behaviour fixes what a bridge registers then): an object schema with no constraint."""

from __future__ import annotations

from palace_bridge.tools import ToolSpec


def test_a_tool_without_an_input_schema_gets_a_bare_object_schema() -> None:
    assert ToolSpec.from_wire({"name": "x"}).input_schema == {"type": "object"}
    assert ToolSpec.from_wire({"name": "x", "inputSchema": "no"}).input_schema == \
        {"type": "object"}
    kept = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert ToolSpec.from_wire({"name": "x", "inputSchema": kept}).input_schema is kept
