"""A hostile stdio MCP server for the bridge's decoder fuzzing: run as ``mempalace-mcp``.

It answers ``initialize`` and ``tools/list`` like a palace; every ``tools/call`` gets garbage chosen
by ``random.Random(f"{seed}:{frame}")``, where ``frame`` is the call's ``frame`` argument and the
seed is ``$HOSTILE_SEED``, so a test reproduces any one answer from its frame number. Standard
library only, so it starts fast (the bridge respawns it after every stall-kill and exit).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

OUT = sys.stdout.buffer
#: each garbage mode, with what the bridge owes the call (``answer``: a result or a tool error
#: eventually; ``fail``: a typed failure, a timeout at worst)
MODES = ("good", "bad_json", "wrong_types", "wrong_id", "huge_line", "unterminated",
         "invalid_utf8", "exit", "partial", "duplicate", "server_requests", "non_objects",
         "bad_content", "error_shapes", "silence")


def write(data: bytes) -> None:
    OUT.write(data)
    OUT.flush()


def line(message: Any) -> None:
    write(json.dumps(message).encode() + b"\n")


def good(request_id: Any, text: str = "ok") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id,
            "result": {"content": [{"type": "text", "text": text}], "isError": False}}


def garbage(rng: random.Random, request_id: Any) -> None:
    mode = rng.choice(MODES)
    sys.stderr.write(f"hostile: mode {mode}\n")
    sys.stderr.flush()
    if mode == "good":
        line(good(request_id))
    elif mode == "bad_json":
        for _ in range(rng.randint(1, 5)):
            write(rng.choice([b"{", b"{'a': 1}", b'{"jsonrpc": "2.0", "id": ', b"nan", b"}{",
                              b'{"id": 1,}', b"\x00\x01\x02", b"[1, 2"]) + b"\n")
        line(good(request_id))
    elif mode == "wrong_types":
        line(rng.choice([
            {"jsonrpc": "2.0", "id": request_id, "result": 5},
            {"jsonrpc": "2.0", "id": request_id, "result": {"content": "text"}},
            {"jsonrpc": "2.0", "id": request_id, "result": {"content": [1, None, "x"]}},
            {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": 7}]},
             "isError": "yes"},
            {"jsonrpc": "2.0", "id": request_id, "error": "boom"},
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": "x", "message": 5}},
            {"jsonrpc": "2.0", "id": request_id, "result": {}, "error": {"code": 1}},
            {"jsonrpc": 2, "id": request_id, "result": None},
            {"id": request_id},
        ]))
    elif mode == "wrong_id":
        for wrong in rng.sample([request_id + 1000, str(request_id), None, [request_id],
                                 {"id": request_id}, -request_id, float(request_id) + 0.5], 3):
            line({**good(wrong), "id": wrong})
        if rng.random() < 0.5:
            line(good(request_id))
    elif mode == "huge_line":
        size = rng.randint(100_000, 4_000_000)
        if rng.random() < 0.5:
            line(good(request_id, "é" * size))
        else:
            write(b'{"junk": "' + b"x" * size + b'"}\n')
            line(good(request_id))
    elif mode == "unterminated":
        write(json.dumps(good(request_id)).encode()[: rng.randint(0, 40)])
        time.sleep(30)
    elif mode == "invalid_utf8":
        write(b'{"jsonrpc": "2.0", "id": ' + str(request_id).encode()
              + b', "result": {"content": [{"type": "text", "text": "a\xff\xfe\xc3("}]}}\n')
    elif mode == "exit":
        if rng.random() < 0.5:
            write(b'{"jsonrpc": "2.0", "id": ')
        os._exit(rng.choice([0, 1, 3]))
    elif mode == "partial":
        write(json.dumps(good(request_id)).encode()[:-3])
        write(b"\n")
    elif mode == "duplicate":
        line(good(request_id, "first"))
        line(good(request_id, "second"))
    elif mode == "server_requests":
        for n in range(rng.randint(1, 300)):
            line({"jsonrpc": "2.0", "id": f"srv-{n}", "method": rng.choice(
                ["ping", "roots/list", "sampling/createMessage", "x"])})
        line({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "hi"}})
        line(good(request_id))
    elif mode == "non_objects":
        for value in rng.sample([[], [1], "x", 1, None, True, [good(request_id)]], 3):
            line(value)
        line(good(request_id))
    elif mode == "bad_content":
        line({"jsonrpc": "2.0", "id": request_id, "result": {"content": [
            {"type": "image", "data": "!!notbase64", "mimeType": 5},
            {"type": "text"}, {"type": "resource", "resource": None},
            {"type": "text", "text": "\u202e\u0000\ud800".encode("utf-8", "surrogatepass")
             .decode("utf-8", "replace")}]}})
    elif mode == "error_shapes":
        line({"jsonrpc": "2.0", "id": request_id, "error": rng.choice([
            {"code": -32001, "message": "locked", "data": {"deep": [[[[1]]]]}},
            {"code": 2**70, "message": "big"}, {"code": -32603, "message": "x" * 100_000},
            {"code": -32602, "message": "é\u0000"}])})
    else:  # silence: the deadline is the only way out
        time.sleep(30)


def main() -> None:
    seed = os.environ.get("HOSTILE_SEED", "0")
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message:
            continue
        method, request_id = message.get("method"), message["id"]
        if method == "initialize":
            line({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"}}})
        elif method == "tools/list":
            line({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [
                {"name": "mempalace_status", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call":
            frame = (message.get("params") or {}).get("arguments", {}).get("frame", 0)
            garbage(random.Random(f"{seed}:{frame}"), request_id)
        elif method == "ping":
            line({"jsonrpc": "2.0", "id": request_id, "result": {}})


if __name__ == "__main__":
    main()
