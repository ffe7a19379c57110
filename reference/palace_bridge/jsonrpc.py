"""JSON-RPC 2.0 without I/O: id allocation, newline framing, message classification, correlation.

Correlation is strict: a response matches only the exact id we sent, of the same JSON type
(``"1"`` is not ``1``). Responses for unknown or already answered ids are ignored, and so are error
responses whose id is ``null`` or absent: they cannot be attributed to a request. (The spec leaves
all three unspecified; ignoring them is the reading that never misroutes an answer.)
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

JSONRPC = "2.0"
DEFAULT_MAX_LINE = 64 * 1024 * 1024

T = TypeVar("T")


class IdAllocator:
    """Integer ids, never reused within a client's life, across respawns too (MCP forbids
    reusing a request id)."""

    def __init__(self, start: int = 1) -> None:
        self._next = itertools.count(start)

    def next(self) -> int:
        return next(self._next)


def request(request_id: int | str, method: str, params: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": JSONRPC, "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": JSONRPC, "method": method}
    if params is not None:
        message["params"] = params
    return message


def result_response(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "id": request_id, "result": result}


def error_response(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC, "id": request_id, "error": {"code": code, "message": message}}


def encode(message: dict[str, Any]) -> bytes:
    """One message as one line: ``json.dumps`` escapes newlines, so none is embedded (MCP's
    stdio framing forbids embedded newlines)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class LineTooLong(ValueError):
    """The peer sent more than ``max_line`` bytes without a newline."""


class LineDecoder:
    """Splits a byte stream into lines; blank lines are skipped, a trailing ``\\r`` is dropped.

    Linear however the stream is chunked: the search for a newline resumes where the last one
    stopped, so an unterminated line is not scanned again on every chunk."""

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        searched = len(self._buffer)  # the buffer held no newline before this chunk
        self._buffer += data
        lines: list[bytes] = []
        start = 0
        while True:
            end = self._buffer.find(b"\n", max(start, searched))
            if end < 0:
                break
            line = bytes(self._buffer[start:end]).rstrip(b"\r")
            if line.strip():
                lines.append(line)
            start = end + 1
        del self._buffer[:start]
        if len(self._buffer) > self.max_line:
            size = len(self._buffer)
            self._buffer.clear()
            raise LineTooLong(f"a message grew past {self.max_line} bytes without a newline "
                              f"({size} bytes buffered)")
        return lines

    @property
    def pending(self) -> int:
        return len(self._buffer)


@dataclass(frozen=True)
class Response:
    id: Any
    result: Any = None
    error: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ServerRequest:
    id: Any
    method: str
    params: Any


@dataclass(frozen=True)
class Notification:
    method: str
    params: Any


@dataclass(frozen=True)
class Invalid:
    reason: str
    raw: str


Message = Response | ServerRequest | Notification | Invalid

#: the only server-to-client request this bridge serves (it declares no client capabilities)
SERVED_SERVER_REQUESTS = frozenset({"ping"})


def answer_server_request(message: ServerRequest) -> dict[str, Any]:
    """The answer to a request the server sent us, to go back at once (TOOL-07): ``ping`` gets
    ``{}``; anything else (``elicitation/create``, ``sampling/createMessage``, ``roots/list``...)
    -32601, so a server awaiting it fails fast instead of holding the call to its timeout."""
    if message.method in SERVED_SERVER_REQUESTS:
        return result_response(message.id, {})
    return error_response(message.id, -32601, f"Method not found: {message.method}")


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def classify(data: Any) -> Message:
    """What a decoded JSON value is, from the client's point of view."""
    raw = _short(data)
    if not isinstance(data, dict):
        return Invalid("not a JSON-RPC object (batches are not used by this client)", raw)
    method = data.get("method")
    if isinstance(method, str):
        if "id" in data and data["id"] is not None:
            if not _valid_id(data["id"]):
                return Invalid("request id is neither a string nor an integer", raw)
            return ServerRequest(data["id"], method, data.get("params"))
        return Notification(method, data.get("params"))
    if "result" in data or "error" in data:
        if "error" in data:
            error = data["error"]
            if not isinstance(error, dict) or not isinstance(error.get("code"), int):
                return Invalid("error response without an integer error code", raw)
            message = error.get("message")
            normal = {**error, "message": message if isinstance(message, str) else str(message)}
            return Response(data.get("id"), error=normal)
        return Response(data.get("id"), result=data["result"])
    return Invalid("neither a request, a notification nor a response", raw)


def parse(line: bytes | str) -> Message:
    """Decode one framed message; bad JSON is :class:`Invalid`, never an exception."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:  # ValueError: also a number past int()'s limit
        text = line.decode(errors="replace") if isinstance(line, bytes) else line
        return Invalid(f"not JSON ({decode_failure(exc)})", text[:200])
    return classify(data)


def decode_failure(exc: ValueError | RecursionError) -> str:
    """What ``json.loads`` could not take, in a few words: its own message for a syntax error,
    a fixed one for nesting past the recursion limit (whose message names no position)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(getattr(exc, "msg", exc)).split(";", 1)[0]


def _short(data: Any) -> str:
    try:
        return json.dumps(data)[:200]
    except (TypeError, ValueError):
        return repr(data)[:200]


def id_key(value: Any) -> tuple[str, Any]:
    """A dict key that tells ``1`` from ``"1"`` and from ``True``."""
    return (type(value).__name__, value)


class Correlator(Generic[T]):
    """Pending requests by id; a response is delivered to its request once, or ignored."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, Any], tuple[str, T]] = {}

    def register(self, request_id: Any, method: str, token: T) -> None:
        key = id_key(request_id)
        if key in self._pending:
            raise ValueError(f"request id {request_id!r} is already pending")
        self._pending[key] = (method, token)

    def match(self, response: Response) -> tuple[str, T] | None:
        """The pending (method, token) this response answers, removed; ``None`` to ignore it."""
        if response.id is None or not _valid_id(response.id):
            return None
        return self._pending.pop(id_key(response.id), None)

    def forget(self, request_id: Any) -> tuple[str, T] | None:
        """Stop waiting for ``request_id`` (timed out, cancelled); a late answer is then ignored."""
        return self._pending.pop(id_key(request_id), None)

    def drain(self) -> list[tuple[Any, str, T]]:
        """Every pending request, removed: the connection is gone."""
        items = [(key[1], method, token) for key, (method, token) in self._pending.items()]
        self._pending.clear()
        return items

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, request_id: Any) -> bool:
        return id_key(request_id) in self._pending
