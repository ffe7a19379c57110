"""The MCP handshake both transports share: ``initialize``, ``notifications/initialized``, and
``tools/list`` following ``nextCursor`` (LIFE-04). Nothing else is sent before the handshake ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .deadlines import Deadline
from .errors import PalaceProtocolError, PalaceToolError
from .jsonrpc import Response
from .log import Log
from .tools import ToolSpec
from .version import __version__

PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
CLIENT_INFO = {"name": "palace-bridge", "version": __version__}
MAX_PAGES = 100

Send = Callable[[str, dict[str, Any] | None, Deadline], Awaitable[Response]]


@dataclass(frozen=True)
class Initialized:
    protocol_version: str
    server_info: dict[str, Any]
    capabilities: dict[str, Any]


def initialize_params() -> dict[str, Any]:
    return {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}


def _result_holding(response: Response, method: str, key: str, kind: type,
                    missing: str) -> dict[str, Any]:
    """The result object of ``method``'s answer, which must hold ``key`` of type ``kind``: an
    error answer is the server's :class:`PalaceToolError`, any other result a
    :class:`PalaceProtocolError` saying ``missing``."""
    if response.error is not None:
        raise PalaceToolError(response.error["code"], response.error["message"],
                              response.error.get("data"), method)
    result = response.result
    if not isinstance(result, dict) or not isinstance(result.get(key), kind):
        raise PalaceProtocolError(missing)
    return result


def check_initialize(response: Response) -> Initialized:
    """Validate the ``initialize`` answer; an unsupported version ends the connect.

    MCP: a client that does not support the version the server chose disconnects."""
    result = _result_holding(response, "initialize", "protocolVersion", str,
                             "initialize result has no protocolVersion")
    version = result["protocolVersion"]
    if version not in SUPPORTED_VERSIONS:
        raise PalaceProtocolError(
            f"server chose protocol version {version!r}; this client speaks "
            f"{', '.join(SUPPORTED_VERSIONS)}"
        )
    info = result.get("serverInfo")
    caps = result.get("capabilities")
    return Initialized(version, info if isinstance(info, dict) else {},
                       caps if isinstance(caps, dict) else {})


async def list_tools(send: Send, deadline: Deadline, log: Log) -> list[ToolSpec]:
    """Every page of ``tools/list``; cursors are opaque and passed back unchanged."""
    tools: list[ToolSpec] = []
    cursor: Any = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        params = {"cursor": cursor} if cursor is not None else None
        response = await send("tools/list", params, deadline)
        result = _result_holding(response, "tools/list", "tools", list,
                                 "tools/list result has no 'tools' list")
        for entry in result["tools"]:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"]:
                tools.append(ToolSpec.from_wire(entry))
            else:
                log.debug(f"skipping a tools/list entry without a name: {str(entry)[:120]}")
        cursor = result.get("nextCursor")
        if cursor is None:
            return tools
        marker = repr(cursor)
        if marker in seen:
            raise PalaceProtocolError(f"tools/list repeated the cursor {marker}; stopping")
        seen.add(marker)
    raise PalaceProtocolError(f"tools/list did not end after {MAX_PAGES} pages")
