"""palace_bridge: the reference Python copy of the MemPalace bridge (pi's ``mempalace.ts``).

Policy (timeouts, backoff, budgets, retry decisions) is plain code over events and a clock; the
transports (a stdio child, a remote HTTP palace) are thin. See ``config`` for every knob.

The public face, for a program that wants a palace client or a harness that hosts the bridge::

    async with create_client(os.environ) as client:      # the transport is picked once
        result = await client.call_tool("mempalace_search", {"query": "x"})

    bridge = await activate(host, os.environ)             # host: anything implementing Host

Every failure is a :class:`PalaceError` with a one-line message and a ``detail``.
"""

from .client import PalaceClient, create_client
from .config import BridgeConfig
from .errors import (
    PalaceAuthError,
    PalaceConnectionClosed,
    PalaceError,
    PalaceHTTPError,
    PalaceProtocolError,
    PalaceSessionLost,
    PalaceTimeout,
    PalaceToolError,
    PalaceUnavailable,
    describe,
)
from .extension import Bridge, activate
from .host import (
    CommandDefinition,
    ExecResult,
    Host,
    InjectedMessage,
    RecordingHost,
    ToolDefinition,
    ToolOutcome,
)
from .tools import ToolResult, ToolSpec
from .version import __version__

__all__ = [
    "Bridge",
    "BridgeConfig",
    "CommandDefinition",
    "ExecResult",
    "Host",
    "InjectedMessage",
    "PalaceAuthError",
    "PalaceClient",
    "PalaceConnectionClosed",
    "PalaceError",
    "PalaceHTTPError",
    "PalaceProtocolError",
    "PalaceSessionLost",
    "PalaceTimeout",
    "PalaceToolError",
    "PalaceUnavailable",
    "RecordingHost",
    "ToolDefinition",
    "ToolOutcome",
    "ToolResult",
    "ToolSpec",
    "__version__",
    "activate",
    "create_client",
    "describe",
]
