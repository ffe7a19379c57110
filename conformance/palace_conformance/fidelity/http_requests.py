"""HTTP requests for ``fidelity --generated --http K``: the HTTP endpoint's methods, headers,
bodies and statuses, drawn by hypothesis and sent to the real ``mempalace`` HTTP server and the
fake's HTTP transport side by side.

A request is an ``http`` step of the fidelity script (:mod:`.execute`): a method (``GET``,
``POST``, ``PUT``, ``DELETE``, ``PATCH``, ``OPTIONS``), a path (``/mcp``, ``/mcp/``,
``/healthz``, an unknown one), headers that replace or remove the well-behaved client's
defaults (``Accept``, ``Content-Type``, ``Origin``, ``Mcp-Session-Id``,
``MCP-Protocol-Version``, ``Authorization``) and a body (a JSON-RPC request, a notification, a
batch, a response, JSON that is no message, text that is not JSON, nothing). Half the sessions
run with a bearer token, so a request goes with the right token, none or a wrong one. The ops
routes (``/statusz``, ``/logstream``, ``/sync``) are left out: the fake does not model them
(docs/real-server.md, "Not compared").
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

TOKEN = "fidelity-generated-token-0123"
METHODS = ("POST", "POST", "POST", "GET", "PUT", "DELETE", "PATCH", "OPTIONS")
PATHS = ("/mcp", "/mcp", "/mcp", "/mcp/", "/healthz", "/nope")
#: header -> values a request may send instead of the default (None: leave it out)
HEADERS: dict[str, tuple[str | None, ...]] = {
    "Accept": (None, "application/json", "text/event-stream", "*/*", "text/html"),
    "Content-Type": (None, "text/plain", "application/json; charset=utf-8",
                     "application/x-www-form-urlencoded"),
    "Origin": ("http://127.0.0.1", "http://evil.example", "null"),
    "Mcp-Session-Id": ("bogus-session",),
    "MCP-Protocol-Version": ("2025-06-18", "2025-03-26", "1999-01-01"),
}
AUTH = ("good", "good", "none", "wrong")
BODIES: tuple[Any, ...] = (
    {"jsonrpc": "2.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "fidelity", "version": "1"}}},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
     "params": {"name": "mempalace_status", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 5, "method": "nope/nothing"},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    [{"jsonrpc": "2.0", "id": 6, "method": "ping"}],
    {"jsonrpc": "2.0", "id": 7, "result": {}},
    {"id": 8, "method": "ping"},
    {"not": "a message"},
    [],
)
TEXT_BODIES = ("{not json", "", "null")


@st.composite
def request(draw: st.DrawFn) -> dict[str, Any]:
    """One HTTP request as an ``http`` step's spec."""
    spec: dict[str, Any] = {"method": draw(st.sampled_from(METHODS)),
                            "path": draw(st.sampled_from(PATHS))}
    if spec["method"] in ("POST", "PUT", "PATCH"):
        if draw(st.integers(0, 4)) == 0:
            spec["body"] = draw(st.sampled_from(TEXT_BODIES))
        else:
            spec["json"] = draw(st.sampled_from(BODIES))
    headers: dict[str, str | None] = {}
    for name, values in HEADERS.items():
        if draw(st.integers(0, 4)) == 0:
            headers[name] = draw(st.sampled_from(values))
    auth = draw(st.sampled_from(AUTH))
    if auth == "wrong":
        headers["Authorization"] = "Bearer wrong-token"
    if auth != "good":
        spec["auth"] = "none"
    if headers:
        spec["headers"] = headers
    return spec


@st.composite
def http_session(draw: st.DrawFn, size: int) -> tuple[bool, list[dict[str, Any]]]:
    """Whether the session's server wants a token, and its requests."""
    return draw(st.booleans()), [draw(request()) for _ in range(size)]


def draw_http(count: int, seed: int, per_session: int) -> list[tuple[bool, list[dict[str, Any]]]]:
    """``count`` requests from ``seed`` in sessions of ``per_session`` (generate phase only,
    no example database): each session's token choice and requests."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    sessions = -(-count // per_session) if count > 0 else 0
    drawn: list[tuple[bool, list[dict[str, Any]]]] = []

    @with_seed(seed)
    @settings(max_examples=sessions + 1, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(http_session(per_session))
    def collect(one: tuple[bool, list[dict[str, Any]]]) -> None:
        drawn.append(one)

    if sessions:
        collect()
    chosen = (drawn[1:] + drawn[:1])[:sessions]
    left = count
    out = []
    for token, requests in chosen:
        out.append((token, requests[:left]))
        left -= len(requests[:left])
    return out
