"""The whole observation of a run: every request the palace received, head and body.

``diff`` between two bridges compares the ``tools/call`` requests only (two bridges' HTTP
libraries differ in headers no agent sees); a run judged against its golden trace
(:mod:`.golden`) is compared on everything the bridge showed the palace: each request's method,
path, headers and body, in the window of the step that made it. Headers are normalised (names
lower-cased, an ``Accept`` list as a set of media types, a ``Content-Type`` without spaces);
the few that are the HTTP library's or the machine's, never the bridge's decision, are left out
by name (:data:`LIBRARY_HEADERS`, fixtures/README.md lists them with the reasons).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from palace_conformance.runner.compare.volatile import Masker

#: headers left out of the observation, and why (every other header is compared)
LIBRARY_HEADERS: Mapping[str, str] = {
    "host": "names the fake's port, the kernel's choice",
    "content-length": "follows from the body, which is compared as JSON (a serialiser's spacing "
                      "is no behaviour)",
    "connection": "the HTTP library's connection reuse",
    "keep-alive": "the HTTP library's connection reuse",
    "accept-encoding": "the HTTP library's compression offer",
    "accept-language": "the HTTP library's default (fetch sends '*')",
    "sec-fetch-mode": "the HTTP library's default (fetch sends 'cors')",
    "user-agent": "the runtime's or library's name and version",
    "transfer-encoding": "how the HTTP library framed the body",
}

#: why ``Accept`` on a DELETE is not observed: MCP's Streamable HTTP transport governs ``Accept``
#: on the POSTs and GETs whose answers a client reads; a session's DELETE has no body to read,
#: so the header is the HTTP library's default there (pi-mcp sends ``*/*``), never a behaviour
UNGOVERNED_ON_DELETE = "accept"

#: what stands for the bridge's own name and version in ``initialize``'s ``clientInfo``
CLIENT_MASK = "<client>"


def without_identity(body: Any) -> Any:
    """An ``initialize`` body with ``clientInfo``'s name and version masked: like the
    User-Agent, they name the bridge (each copy of the seed its own), not a behaviour."""
    if not isinstance(body, dict) or body.get("method") != "initialize":
        return body
    params = body.get("params")
    info = params.get("clientInfo") if isinstance(params, dict) else None
    if not isinstance(params, dict) or not isinstance(info, dict):
        return body
    masked = {k: CLIENT_MASK if k in ("name", "version") else v for k, v in info.items()}
    return {**body, "params": {**params, "clientInfo": masked}}


#: what stands for a cancel's ``requestId`` when it names a request the bridge sent, in its JSON
#: type (the fake's ``request_known``): which number a client library gives its requests is the
#: library's (the official SDK counts from 0, the reference and pi-mcp from 1); naming the request
#: it cancels, type and all, is the bridge's, so an id that names nothing stays as it was sent
CANCEL_TARGET_MASK = "<sent request id>"


def with_cancel_target(body: Any, known: Any) -> Any:
    """A ``notifications/cancelled`` body whose ``requestId`` named a request the bridge sent
    (``known``) with that id masked (:data:`CANCEL_TARGET_MASK`); any other body as it is."""
    if known is not True or not isinstance(body, dict):
        return body
    params = body.get("params")
    if body.get("method") != "notifications/cancelled" or not isinstance(params, dict):
        return body
    return {**body, "params": {**params, "requestId": CANCEL_TARGET_MASK}}


def normalised_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """Lower-cased names, sorted; ``Accept`` as its sorted media types; ``Content-Type``
    lower-cased without spaces; the library's own headers left out."""
    out: dict[str, Any] = {}
    for name in sorted(headers, key=str.lower):
        key = name.lower()
        if key in LIBRARY_HEADERS:
            continue
        value = headers[name]
        if key == "accept" and isinstance(value, str):
            out[key] = sorted({part.strip().lower() for part in value.split(",") if part.strip()})
        elif key == "content-type" and isinstance(value, str):
            out[key] = "".join(value.lower().split())
        else:
            out[key] = value
    return out


def with_late_calls(windows: Mapping[str, Sequence[Mapping[str, Any]]],
                    timed_out: Mapping[str, str]) -> dict[str, list[Mapping[str, Any]]]:
    """The windows with each timed-out call's request in its own step's window.

    ``timed_out`` maps a window to the tool of a ``call_tool`` step in it that ended as a
    timeout. The bridge wrote that request when the step began, but the step returned at the
    deadline, not when the palace read it: with a deadline of a few milliseconds on a loaded
    machine, the palace reads it after the next step started. When the window holds no
    ``tools/call`` of that tool, the first one in a later window (with its HTTP head) is moved
    back; a call the bridge never made is still missing, one made twice is still extra."""
    out = {key: list(records) for key, records in windows.items()}
    keys = list(out)
    for position, key in enumerate(keys):
        tool = timed_out.get(key)
        if tool is None or any(_is_call_of(record, tool) for record in out[key]):
            continue
        for later in keys[position + 1:]:
            found = next((r for r in out[later] if _is_call_of(r, tool)), None)
            if found is None:
                continue
            moved = [found]
            if "http" in found:
                moved = [r for r in out[later] if r is found or (
                    r.get("kind") == "http_request" and r.get("conn") == found.get("conn"))]
            out[later] = [r for r in out[later] if not any(r is m for m in moved)]
            out[key].extend(moved)
            break
    for key, tool in timed_out.items():
        # over stdio the bridge retires the child it gave up on: whether that child read the
        # request first is the timing's, so one such call is left out (a second is still extra)
        first = next((r for r in out.get(key, []) if _is_call_of(r, tool)), None)
        if first is not None and "http" not in first:
            out[key] = [r for r in out[key] if r is not first]
    return out


def _is_call_of(record: Mapping[str, Any], tool: str) -> bool:
    return (record.get("kind") == "recv" and record.get("method") == "tools/call"
            and record.get("tool") == tool)


def requests(windows: Mapping[str, Iterable[Mapping[str, Any]]],
             masker: Masker) -> dict[str, list[dict[str, Any]]]:
    """Every request the palace received, by window (a step's journal records): over HTTP its
    method, path, headers and body (the JSON-RPC message, when there was one: a GET or DELETE
    has none), over stdio its message; each masked, sorted (requests a bridge makes at once
    arrive in either order). A head and its body are journalled apart and may fall in two
    windows: the request is the head's window's."""
    out: dict[str, list[dict[str, Any]]] = {key: [] for key in windows}
    open_requests: dict[Any, dict[str, Any]] = {}
    statuses: dict[Any, Any] = {}
    hung_up: set[Any] = set()  # connections whose peer hung up inside the request's body
    for key, records in windows.items():
        for record in records:
            kind = record.get("kind")
            if kind == "http_body_unread" and record.get("peer_closed") is True:
                hung_up.add(record.get("conn"))
            elif kind == "http_response":
                statuses[record.get("conn")] = record.get("status")
            elif kind == "http_request" and record.get("method") is not None:
                headers = record.get("headers")
                seen = normalised_headers(headers if isinstance(headers, Mapping) else {})
                if record.get("method") == "DELETE":
                    seen.pop("accept", None)  # see UNGOVERNED_ON_DELETE
                request = {"method": record.get("method"), "path": record.get("path"),
                           "headers": masker.value(seen), "conn": record.get("conn")}
                out[key].append(request)
                open_requests[record.get("conn")] = request
            elif kind == "recv":
                body = with_cancel_target(without_identity(masker.value(
                    record.get("message", record.get("raw")))), record.get("request_known"))
                if "http" in record and record.get("conn") in open_requests:
                    open_requests.pop(record.get("conn"))["body"] = body
                else:
                    out[key].append({"body": body})
    # a POST refused with 404 before its body was read met a session the palace forgot: which
    # request met it first (a step's or the keep-alive timer's) is the timing's; so is a POST
    # the bridge hung up on inside its body (a keep-alive ping cut off by shutdown): left out
    for key, found in out.items():
        kept = [r for r in found if not (r.get("method") == "POST" and "body" not in r and (
            statuses.get(r.get("conn")) == 404 or r.get("conn") in hung_up))]
        for request in kept:
            request.pop("conn", None)
        out[key] = sorted(kept, key=lambda request: json.dumps(request, sort_keys=True,
                                                               default=str))
    return out


def unpaced(request: Mapping[str, Any]) -> str | None:
    """``"pings"``, ``"refused"``, ``"notifications"`` or ``"responses"`` for a request no
    step paces: a keep-alive ping goes out on a timer (how many fall in a step is the clock's;
    so does a POST the palace refused before reading its body, the ping of a forgotten
    session); a
    notification, or the bridge's answer to a request of the palace's, is sent without waiting
    (a cancel after a timeout reaches the palace while the next step runs, on a loaded
    machine); None for any other."""
    body = request.get("body")
    method = body.get("method") if isinstance(body, dict) else None
    if method == "ping":
        return "pings"
    if request.get("method") == "POST" and "body" not in request:
        return "refused"  # refused before its body was read (a forgotten session's ping)
    if isinstance(method, str) and method.startswith("notifications/"):
        return "notifications"
    if isinstance(body, dict) and method is None and ("result" in body or "error" in body):
        return "responses"
    return None


def _cancel(request: Mapping[str, Any]) -> bool:
    body = request.get("body")
    return isinstance(body, Mapping) and body.get("method") == "notifications/cancelled"


def whole_run(requests_by_window: Iterable[list[dict[str, Any]]]) -> dict[str, Any]:
    """The unpaced requests of the whole run: every notification and response (multisets,
    sorted), each distinct ping and, when there were any, each distinct refused POST (how many
    is the timer's)."""
    counted: dict[str, list[dict[str, Any]]] = {"notifications": [], "responses": []}
    distinct: dict[str, dict[str, dict[str, Any]]] = {"pings": {}}
    for window in requests_by_window:
        for request in window:
            kind = unpaced(request)
            if kind == "notifications" and "method" not in request and _cancel(request):
                continue  # a stdio cancel races the retirement of the child it was sent to
            if kind in counted:
                counted[kind].append(request)
            elif kind in ("pings", "refused"):
                distinct.setdefault(kind, {})[json.dumps(request, sort_keys=True,
                                                         default=str)] = request
    out: dict[str, Any] = {kind: sorted(found, key=lambda request: json.dumps(
        request, sort_keys=True, default=str)) for kind, found in counted.items()}
    for kind, found in distinct.items():
        out[kind] = [found[key] for key in sorted(found)]
    return out
