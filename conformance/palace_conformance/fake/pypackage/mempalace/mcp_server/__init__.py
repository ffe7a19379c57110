"""``python -m mempalace.mcp_server``: the full server, as ``mempalace-mcp`` runs it when no hub
is live (``mempalace.mcp_server.main``).

The module also has what the real one exposes at import for a bridge that calls the palace in
process: ``TOOLS``, the tool name -> ``{"description", "input_schema", "handler"}``, where
``handler(**arguments)`` runs the tool against the fake palace of the run (its state file) and
returns the tool's result object. It is built on first use (PEP 562), so importing the module
still loads nothing of the kit.
"""

from __future__ import annotations

from typing import Any

from .._serve import serve


def main() -> None:
    serve()


def _tools() -> dict[str, dict[str, Any]]:
    import os

    from .._kit import load_kit

    load_kit()  # the kit on sys.path and the run's settings applied
    from palace_conformance.fake.lease import default_palace_path
    from palace_conformance.fake.options import ENV_STATE
    from palace_conformance.fake.palace import PalaceStore, run_tool
    from palace_conformance.resources import tool_catalogue

    def handler_for(name: str) -> Any:
        def handler(**arguments: Any) -> dict[str, Any]:
            store = PalaceStore(os.environ.get(ENV_STATE) or None)
            return run_tool(store, name, dict(arguments), default_palace_path())

        handler.__name__ = name
        return handler

    return {tool["name"]: {"description": tool.get("description", ""),
                           "input_schema": tool.get("inputSchema", {}),
                           "handler": handler_for(tool["name"])}
            for tool in tool_catalogue()["tools"]}


def __getattr__(name: str) -> Any:
    if name == "TOOLS":
        tools = _tools()
        globals()["TOOLS"] = tools
        return tools
    raise AttributeError(f"module 'mempalace.mcp_server' has no attribute {name!r}")
