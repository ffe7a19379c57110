"""Seeded generators of hostile frames for the volume fuzz tests (issue 13, hardening).

Hypothesis draws a few hundred examples well but is slow per example; tens of thousands of frames
need a plain generator. Each function takes a :class:`random.Random`, so a failing frame is
reproduced from the seed and its index alone (the tests print both).
"""

from __future__ import annotations

import json
import os
import random
import string
from typing import Any

#: frames per transport by default; ``PALACE_FUZZ_FRAMES`` asks for more (or fewer, to debug)
DEFAULT_FRAMES = 10_000
FRAMES_ENV = "PALACE_FUZZ_FRAMES"
SEED_ENV = "PALACE_FUZZ_SEED"

SAFE_TOOLS = ["mempalace_status", "mempalace_kg_query", "mempalace_diary_read", "mempalace_search",
              "mempalace_kg_stats", "mempalace_list_wings", "mempalace_get_aaak_spec",
              "mempalace_kg_add", "mempalace_event_list", "mempalace_nope"]
METHODS = ["initialize", "ping", "tools/list", "tools/call", "notifications/initialized",
           "notifications/cancelled", "resources/list", "server/discover", ""]
ARGUMENT_NAMES = ["query", "entity", "agent_name", "last_n", "limit", "subject", "predicate",
                  "object", "stream", "wing", "bogus"]


def frames_wanted() -> int:
    """How many frames a volume test sends: ``$PALACE_FUZZ_FRAMES`` or :data:`DEFAULT_FRAMES`."""
    raw = os.environ.get(FRAMES_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_FRAMES


def timeout_for_frames() -> float:
    """pytest-timeout's bound for a volume test: generous (a loaded CI machine ran 10,000 HTTP
    frames in 90 s), and growing with ``PALACE_FUZZ_FRAMES``."""
    return 120 + frames_wanted() * 0.05


def seed() -> int:
    """The run's seed: ``$PALACE_FUZZ_SEED`` to reproduce one, else a fixed default."""
    raw = os.environ.get(SEED_ENV, "")
    return int(raw) if raw.isdigit() else 13


def text(rng: random.Random, most: int = 12) -> str:
    """Short text over a hostile alphabet: ASCII, controls, a surrogate-free astral, RTL."""
    alphabet = string.printable + "\x00\x1b\u00e9\u202e\u2028\U0001f600\"\\{}[]"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, most)))


def scalar(rng: random.Random) -> Any:
    pick = rng.randrange(7)
    if pick == 0:
        return None
    if pick == 1:
        return rng.random() < 0.5
    if pick == 2:
        return rng.randint(-(2**70), 2**70)
    if pick == 3:
        return rng.uniform(-1e300, 1e300)
    if pick == 4:
        return rng.randint(-5, 5)
    return text(rng, 30)


def value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value of up to three levels."""
    pick = rng.randrange(5) if depth < 3 else 0
    if pick <= 2:
        return scalar(rng)
    if pick == 3:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {text(rng, 8): value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def request_id(rng: random.Random) -> Any:
    return rng.choice([None, rng.randint(-(2**60), 2**60), text(rng), rng.random(),
                       [rng.randint(0, 9)], rng.randint(0, 1000)])


def rpc_ish(rng: random.Random) -> dict[str, Any]:
    """An object that looks like JSON-RPC to varying degrees (every member optional)."""
    message: dict[str, Any] = {}
    if rng.random() < 0.85:
        message["jsonrpc"] = rng.choice(["2.0", "2.0", "2.0", "1.0", 2, None])
    if rng.random() < 0.8:
        message["id"] = request_id(rng)
    if rng.random() < 0.9:
        message["method"] = rng.choice(METHODS) if rng.random() < 0.8 else value(rng, 2)
    if rng.random() < 0.7:
        if message.get("method") == "tools/call" and rng.random() < 0.8:
            arguments: Any = {rng.choice(ARGUMENT_NAMES): value(rng, 1)
                              for _ in range(rng.randint(0, 4))}
            message["params"] = {"name": rng.choice(SAFE_TOOLS) if rng.random() < 0.9
                                 else value(rng, 2),
                                 "arguments": arguments if rng.random() < 0.9 else value(rng, 2)}
        else:
            message["params"] = value(rng, 1)
    if rng.random() < 0.1:
        message["result"] = value(rng, 1)
    return message


def dumps(message: Any) -> bytes:
    """JSON bytes; non-ASCII escaped or raw by the text's length, so both forms get sent (and
    the choice is reproducible, unlike ``hash``)."""
    escaped = json.dumps(message)
    if len(escaped) % 2:
        return escaped.encode()
    return json.dumps(message, ensure_ascii=False).encode("utf-8", "replace")


def stdio_line(rng: random.Random) -> tuple[str, bytes]:
    """(kind, one stdin line without its newline): what a hostile client could write."""
    roll = rng.random()
    if roll < 0.45:
        return "rpc", dumps(rpc_ish(rng))
    if roll < 0.55:
        return "batch", dumps([rpc_ish(rng) for _ in range(rng.randint(0, 3))])
    if roll < 0.65:
        return "json", dumps(value(rng))
    if roll < 0.75:
        return "bytes", rng.randbytes(rng.randint(0, 200)).replace(b"\n", b" ")
    if roll < 0.82:  # valid JSON-RPC cut short, or with a stray byte in it
        whole = dumps(rpc_ish(rng))
        cut = rng.randint(0, len(whole))
        return "truncated", whole[:cut] + (rng.randbytes(1).replace(b"\n", b"") if cut % 2 else b"")
    if roll < 0.88:  # invalid UTF-8 inside a string of an otherwise good request
        bad = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x28\x8c\x28", b"\x80"])
        return "utf8", (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":'
                        b'"mempalace_kg_query","arguments":{"entity":"a' + bad + b'z"}}}')
    if roll < 0.93:
        # not 500-2000: whether that parses depends on how deep the parser's caller's stack
        # already is (``RecursionError``), which differs between the fake and this test
        depth = rng.randint(1, 500) if rng.random() < 0.7 else rng.randint(2000, 100_000)
        opener = rng.choice(["[", '{"a":'])
        closer = "]" if opener == "[" else "}"
        body = opener * depth + "1" + (closer * depth if rng.random() < 0.5 else "")
        return "deep", b'{"jsonrpc":"2.0","id":1,"method":"ping","deep":' + body.encode() + b"}"
    if roll < 0.97:
        return "blank", rng.choice([b"", b" ", b"\t", b"\r", b"  \r"])
    size = rng.randint(20_000, 1_000_000 if rng.random() < 0.2 else 100_000)
    big = "\u00e9" * (size // 2) + "x" * (size - size // 2)
    where = rng.randrange(3)
    if where == 0:
        message: Any = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "mempalace_kg_query", "arguments": {"entity": big}}}
    elif where == 1:
        message = {"jsonrpc": "2.0", "id": big[:5000], "method": big}
    else:
        return "huge", big.encode()
    return "huge", dumps(message)


# -- HTTP ---------------------------------------------------------------------------------------

HEADER_NAMES = ["Host", "Origin", "Authorization", "Content-Type", "Mcp-Session-Id",
                "Last-Event-ID", "Accept", "Connection", "MCP-Protocol-Version", "Expect",
                "X-Junk", "Cookie", "Upgrade"]
PATHS = ["/mcp", "/mcp", "/mcp", "/healthz", "/_fake/journal", "/nope", "*", "/mcp?x=1", "//mcp",
         "/mcp/../mcp", "/%2e%2e/mcp", "/mcp#frag"]
METHOD_NAMES = ["POST", "POST", "GET", "DELETE", "PUT", "OPTIONS", "HEAD", "PATCH", "TRACE"]
#: control routes that would change the fake under the other frames' feet
DISRUPTIVE = ("/_fake/reset", "/_fake/faults", "/_fake/token", "/_fake/sessions", "/_fake/exit",
              "/_fake/crash", "/_fake/stop", "/_fake/shutdown")


def header_value(rng: random.Random) -> str:
    """A header value as a client could send it (latin-1, no CR/LF), sometimes long."""
    if rng.random() < 0.05:
        return "A" * rng.randint(1000, 20_000)
    alphabet = "".join(chr(c) for c in range(0x20, 0x100) if c != 0x7F)
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))


def header_name(rng: random.Random) -> str:
    if rng.random() < 0.7:
        return rng.choice(HEADER_NAMES)
    name = "".join(rng.choice(string.ascii_letters + "-") for _ in range(rng.randint(1, 12)))
    return "X-" + name if name.lower() in ("content-length", "transfer-encoding") else name


def http_body(rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.5:
        return dumps(rpc_ish(rng))
    if roll < 0.6:
        return dumps([rpc_ish(rng) for _ in range(rng.randint(0, 3))])
    if roll < 0.7:
        return dumps(value(rng))
    if roll < 0.8:
        return stdio_line(rng)[1][:4000]
    return rng.randbytes(rng.randint(0, 300))


def http_request(rng: random.Random, port: int) -> tuple[str, bytes, bool, Any]:
    """(kind, bytes to send, half-close after sending, the JSON-RPC message for a clean POST).

    ``clean``: a well-formed POST /mcp with the headers a client sends and a generated body,
    whose answer is checked against the JSON-RPC rules; ``headers``: the same with hostile
    headers added; ``any``: any method, path, headers and body; ``junk``: raw bytes."""
    roll = rng.random()
    good_host = f"127.0.0.1:{port}"
    if roll < 0.1:
        prefix = rng.choice([b"", b"POST /mcp HTTP/1.1\r\n", b"GET / HTTP/1.0\r\n\r\n",
                             b"POST /mcp HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n",
                             b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"])
        return "junk", prefix + rng.randbytes(rng.randint(0, 200)), True, None
    base = [("Host", good_host), ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream")]
    if roll < 0.45:
        message = rpc_ish(rng) if rng.random() < 0.85 else [rpc_ish(rng)
                                                             for _ in range(rng.randint(1, 3))]
        body = dumps(message)
        return "clean", _request("POST", "/mcp", body, base), False, message
    if roll < 0.7:
        headers = [h for h in base if rng.random() < 0.8]
        headers += [(header_name(rng), header_value(rng)) for _ in range(rng.randint(1, 6))]
        return "headers", _request("POST", "/mcp", http_body(rng), headers), False, None
    path = rng.choice(PATHS) if rng.random() < 0.8 else "/" + text(rng, 30).encode(
        "ascii", "ignore").decode().replace(" ", "%20").replace("\r", "").replace("\n", "")
    if path.startswith(DISRUPTIVE):
        path = "/nope"
    method = rng.choice(METHOD_NAMES) if rng.random() < 0.85 else "".join(
        rng.choice(string.ascii_letters + "-_!") for _ in range(rng.randint(1, 8)))
    headers = [h for h in base if rng.random() < 0.7]
    headers += [(header_name(rng), header_value(rng)) for _ in range(rng.randint(0, 5))]
    body = http_body(rng)
    if rng.random() < 0.15:
        headers.append(("Transfer-Encoding", "chunked"))
        body = (f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n") if body else b"0\r\n\r\n"
    elif rng.random() < 0.1:  # a Content-Length that lies, either way (then a half-close: the
        # server's 10 s body read is its own bound, not a hang worth waiting for every time)
        headers.append(("Content-Length", str(max(0, len(body) + rng.randint(-50, 50)))))
        return "any", _request(method, path, body, headers), True, None
    return "any", _request(method, path, body, headers), rng.random() < 0.5, None


def _request(method: str, target: str, body: bytes, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"{method} {target} HTTP/1.1"]
    if not any(name.lower() in ("content-length", "transfer-encoding") for name, _ in headers):
        headers = [*headers, ("Content-Length", str(len(body)))]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
