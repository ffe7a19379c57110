"""Mutants of TOOL: tools as the agent sees them (schemas, arguments, errors)."""

from __future__ import annotations

import dataclasses
from typing import Any

from palace_conformance.selftest.mutants.model import Mutant
from palace_conformance.selftest.mutants.patching import (
    mutant,
)

LOOSENED_KEYWORDS = frozenset({"maximum", "minimum", "maxLength", "minLength", "maxItems"})


def _loosen(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _loosen(v) for k, v in schema.items()
                if not (k in LOOSENED_KEYWORDS and isinstance(v, int | float))}
    if isinstance(schema, list):
        return [_loosen(v) for v in schema]
    return schema


def _schemas_loosened(original: Any) -> Any:
    read = original.__func__

    def from_wire(cls: Any, data: dict[str, Any]) -> Any:
        spec = read(cls, data)
        return dataclasses.replace(spec, input_schema=_loosen(spec.input_schema))

    return classmethod(from_wire)


def _is_error_raised(original: Any) -> Any:
    from palace_bridge.errors import PalaceToolError

    async def call_tool(self: Any, name: str, arguments: dict[str, Any] | None = None, *,
                        timeout_ms: int | None = None) -> Any:
        result = await original(self, name, arguments, timeout_ms=timeout_ms)
        if result.is_error:
            raise PalaceToolError(-32000, result.text or "tool error", None, "tools/call")
        return result

    return call_tool


def _nulls_dropped(original: Any) -> Any:
    async def call_tool(self: Any, name: str, arguments: dict[str, Any] | None = None, *,
                        timeout_ms: int | None = None) -> Any:
        if isinstance(arguments, dict):
            arguments = {k: v for k, v in arguments.items() if v is not None}
        return await original(self, name, arguments, timeout_ms=timeout_ms)

    return call_tool


def _error_data_dropped(original: Any) -> Any:
    class PalaceToolError(original):  # type: ignore[misc]
        def __init__(self, code: int, message: str, data: Any = None, method: str = "") -> None:
            super().__init__(code, message, None, method)

    return PalaceToolError


def _private_key_on_the_wire(original: Any) -> Any:
    async def request(self: Any, method: str, params: dict[str, Any] | None,
                      timeout_ms: int | None = None) -> Any:
        if method == "tools/call" and params is not None:
            params = {**params, "callId": "pi-call-1"}  # the bridge's own bookkeeping leaks
        return await original(self, method, params, timeout_ms)

    return request


def _ids_matched_as_text(original: Any) -> Any:
    def id_key(value: Any) -> tuple[str, Any]:
        return ("id", str(value))  # 7 and "7" become one key, as String(id) would make them

    return id_key


def _server_requests_ignored_http(original: Any) -> Any:
    def _answer_soon(self: Any, message: Any, headers: dict[str, str]) -> None:
        if message.method == "ping":  # only what it serves is answered; the rest is dropped
            original(self, message, headers)

    return _answer_soon


def _server_requests_ignored_stdio(original: Any) -> Any:
    def _answer_server_request(self: Any, message: Any) -> None:
        if message.method == "ping":
            original(self, message)

    return _answer_server_request


MUTANTS: tuple[Mutant, ...] = (
    # TOOL
    mutant("tool-schemas-loosened", "TOOL-01",
       "numeric bounds (maximum, minLength, ...) are stripped from registered schemas",
       ("palace_bridge.tools:ToolSpec.from_wire", _schemas_loosened)),
    mutant("tool-null-arguments-dropped", "TOOL-02",
       "top-level null arguments are removed before tools/call",
       ("palace_bridge.client:PalaceClient.call_tool", _nulls_dropped)),
    mutant("tool-call-params-leak-a-private-key", "TOOL-02",
       "the bridge's own call id rides along in tools/call params",
       ("palace_bridge.local:LocalEngine.request", _private_key_on_the_wire),
       ("palace_bridge.remote:RemoteEngine.request", _private_key_on_the_wire)),
    mutant("tool-is-error-raised", "TOOL-03",
       "an isError result is turned into an exception",
       ("palace_bridge.client:PalaceClient.call_tool", _is_error_raised)),
    mutant("tool-error-data-dropped", "TOOL-04",
       "a JSON-RPC error reaches the agent without its data",
       ("palace_bridge.client:PalaceToolError", _error_data_dropped)),
    mutant("tool-ids-matched-as-text", "TOOL-06",
       "responses are matched to requests by the id's text, so \"7\" answers request 7",
       ("palace_bridge.jsonrpc:id_key", _ids_matched_as_text)),
    mutant("tool-server-requests-ignored", "TOOL-07",
       "a server request other than ping (elicitation/create, sampling/createMessage) is ignored, "
       "never refused",
       ("palace_bridge.http:HttpTransport._answer_soon", _server_requests_ignored_http),
       ("palace_bridge.stdio:StdioConnection._answer_server_request",
        _server_requests_ignored_stdio)),
)
