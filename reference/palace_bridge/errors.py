"""Typed failures of the palace client: a host can tell *why* a call failed and say so plainly.

Every error carries a message a person understands on its own (no traceback needed), and the
context behind it in one attribute, ``detail`` (``""`` when there is none); the fields a host maps
to a driver error (``code``, ``status``, ``data``, ...) are attributes of the class that has them.
None of them ever holds the remote token: a server can echo it in anything it sends, so every
error passes :func:`redact_error` on its way out of :class:`~.client.PalaceClient`, the one place
errors leave the bridge for a host.
"""

from __future__ import annotations

from typing import Any

REDACTED = "<redacted>"


class PalaceError(Exception):
    """Base of every error the palace client raises."""

    detail: str = ""  # the context behind the message, e.g. what the server said; "" when none


class PalaceTimeout(PalaceError):
    """A request got no answer within its deadline (STDIO-01, HTTP-11)."""

    def __init__(self, method: str, timeout_ms: int, detail: str = "") -> None:
        self.method = method
        self.timeout_ms = timeout_ms
        self.detail = detail
        text = f"mempalace request {method} timed out after {timeout_ms} ms"
        super().__init__(f"{text}; {detail}" if detail else text)


class PalaceUnavailable(PalaceError):
    """The palace cannot be reached at all: never started, budget spent, stopped, unreachable."""

    def __init__(self, detail: str) -> None:
        self.detail = detail  # why: "never started", "respawn budget spent", ...
        super().__init__(f"mempalace unavailable: {detail}")


class PalaceToolError(PalaceError):
    """The server answered with a JSON-RPC error; code, message and data are kept (TOOL-04)."""

    def __init__(self, code: int, message: str, data: Any = None, method: str = "") -> None:
        self.code = code
        self.message = message
        self.data = data
        self.method = method
        super().__init__(f"mempalace error {code}: {message}")

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


#: how an error answer's HTML body is summarised (its markup is no use in a one-line error)
HTML_ERROR_PAGE = "HTML error page"


class PalaceAuthError(PalaceError):
    """The remote palace refused the credentials (401); re-initializing would not help (HTTP-08)."""

    def __init__(self, status: int, detail: str = "") -> None:
        self.status = status
        self.detail = detail
        # what happened, once: a body that only says "an HTML page" tells nothing about a 401
        said = f": {detail}" if detail and detail != HTML_ERROR_PAGE else ""
        super().__init__(f"mempalace refused the credentials (HTTP {status}{said}); "
                         "check MEMPALACE_REMOTE_TOKEN")


class PalaceSessionLost(PalaceError):
    """The remote palace forgot the session again right after it was replaced (HTTP-04)."""

    def __init__(self, detail: str = "") -> None:
        self.detail = detail
        text = "mempalace session lost: the server answered 404 again after a fresh initialize"
        super().__init__(f"{text} ({detail})" if detail else text)


class PalaceConnectionClosed(PalaceError):
    """The connection died under an in-flight request: child exit or connection reset (STDIO-12)."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"mempalace connection closed: {detail}")


class PalaceProtocolError(PalaceError):
    """The server broke the protocol (bad JSON, 202 to a request, wrong content type, ...)."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"mempalace protocol error: {detail}")


class PalaceHTTPError(PalaceError):
    """The remote palace answered an HTTP error; the status and any JSON-RPC error are kept."""

    def __init__(self, status: int, rpc_error: dict[str, Any] | None = None,
                 detail: str = "") -> None:
        self.status = status
        self.rpc_error = rpc_error
        self.detail = detail
        text = f"mempalace HTTP {status}"
        if rpc_error is not None:
            text += f" (JSON-RPC {rpc_error.get('code')}: {rpc_error.get('message')})"
        if detail:
            text += f": {detail}"
        super().__init__(text)

    @property
    def code(self) -> int | None:
        """The JSON-RPC error code when the body carried one (it wins over the HTTP status)."""
        if self.rpc_error is None:
            return None
        code = self.rpc_error.get("code")
        return code if isinstance(code, int) else None


def describe(error: BaseException) -> str:
    """One line for a person, whatever failed."""
    text = str(error) or type(error).__name__
    return " ".join(text.split())


def redact_text(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret replaced by ``<redacted>``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def redact_error(error: PalaceError, secrets: tuple[str, ...]) -> PalaceError:
    """``error`` itself, with every secret replaced in its message and in every field (JSON-RPC
    ``message`` and ``data`` included, however deeply nested)."""
    if any(secrets):
        error.args = tuple(_redacted(arg, secrets) for arg in error.args)
        for name, value in list(vars(error).items()):
            setattr(error, name, _redacted(value, secrets))
    return error


def _redacted(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {_redacted(k, secrets): _redacted(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redacted(v, secrets) for v in value)
    return value
