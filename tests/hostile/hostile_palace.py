"""A hostile HTTP palace for ``record --upstream`` tests: ``python hostile_palace.py`` prints
``PORT`` and serves ``/mcp`` on loopback until killed.

* ``POST`` a ``tools/call``: a small JSON answer (``Content-Length``);
* ``POST`` method ``stream``: an event stream of ``params.count`` server requests (each with an
  id, as a palace asking the bridge for sampling), as fast as the socket takes them;
* ``POST`` method ``big``: a ``Content-Length`` JSON answer of ``params.mb`` megabytes;
* ``GET``: an event stream that sends a server request every millisecond until the client goes.
"""

from __future__ import annotations

import asyncio
import json
import sys


def event(message: object) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ")[0]
            headers = {k.strip().lower(): v.strip() for k, _, v in
                       (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Cache-Control: no-cache\r\n\r\n")
                n = 0
                while True:
                    n += 1
                    writer.write(event({"jsonrpc": "2.0", "id": f"g{n}",
                                        "method": "sampling/createMessage", "params": {}}))
                    await writer.drain()
                    await asyncio.sleep(0.001)
            message = json.loads(body or b"{}")
            rpc = message.get("method")
            params = message.get("params") or {}
            if rpc == "stream":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Connection: close\r\n\r\n")
                for n in range(int(params.get("count", 10000))):
                    writer.write(event({"jsonrpc": "2.0", "id": n,
                                        "method": "sampling/createMessage", "params": {}}))
                    if n % 100 == 0:
                        await writer.drain()
                await writer.drain()
                writer.close()
                return
            if rpc == "big":
                size = int(params.get("mb", 200)) * 1024 * 1024
                head_text = ('{"jsonrpc": "2.0", "id": ' + json.dumps(message.get("id"))
                             + ', "result": {"pad": "')
                tail_text = '"}}'
                pad = size - len(head_text) - len(tail_text)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             + f"Content-Length: {size}\r\n\r\n".encode() + head_text.encode())
                block = b"x" * (1024 * 1024)
                while pad > 0:
                    writer.write(block[:pad])
                    pad -= min(pad, len(block))
                    await writer.drain()
                writer.write(tail_text.encode())
                await writer.drain()
                continue
            answer = json.dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": {
                "content": [{"type": "text", "text": "{\"ok\": true}"}]}}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(answer)}\r\n\r\n".encode() + answer)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
