"""``palace-bridge``: the reference bridge's client core from a shell, configured by the same env.

    palace-bridge tools                       JSON list of the palace's tools and their schemas
    palace-bridge call TOOL ['JSON-ARGS']     run one tool, print its result as JSON
    palace-bridge run                         JSON lines on stdin, one result line per call

A failure prints one line on stderr and exits non-zero; see :data:`EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from . import jsonrpc
from .client import PalaceClient, create_client
from .config import BridgeConfig
from .errors import (
    PalaceAuthError,
    PalaceError,
    PalaceTimeout,
    PalaceToolError,
    PalaceUnavailable,
    describe,
)

EXIT_OK = 0
EXIT_TOOL = 1         # JSON-RPC error from the tool, or an isError result
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3  # could not start, respawn budget spent, remote unreachable
EXIT_TIMEOUT = 4
EXIT_OTHER = 5        # protocol, HTTP, session or connection failure
EXIT_AUTH = 6         # the remote palace refused the token (401): fix the token, not the palace

EXIT_CODES = f"""\
exit codes: {EXIT_OK} ok, {EXIT_TOOL} tool error (JSON-RPC error or isError result),
{EXIT_USAGE} usage, {EXIT_UNAVAILABLE} palace unavailable, {EXIT_TIMEOUT} timeout,
{EXIT_OTHER} other failure (protocol, HTTP, session, connection), {EXIT_AUTH} token refused (401)

environment: MEMPALACE_REMOTE_URL (remote palace; else a local mempalace-mcp child),
MEMPALACE_REMOTE_TOKEN, MEMPALACE_MCP_TIMEOUT_MS, MEMPALACE_MCP_INIT_TIMEOUT_MS,
MEMPALACE_MCP_MAX_RESPAWNS, MEMPALACE_MCP_RESPAWN_BACKOFF_MS, MEMPALACE_MCP_KILL_GRACE_MS,
MEMPALACE_MCP_KEEPALIVE_MS, MEMPALACE_SESSION_PREAMBLE, MEMPALACE_EXT_DEBUG=1 (debug lines)
"""


class UsageError(Exception):
    """A mistake on the command line; the message says what to fix."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="palace-bridge",
        description="Talk to a MemPalace MCP server the way the reference bridge does.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    sub.add_parser("tools", help="print the tool list (names, descriptions, input schemas)")
    call = sub.add_parser("call", help="call one tool and print its result as JSON")
    call.add_argument("tool", metavar="TOOL")
    call.add_argument("arguments", metavar="JSON-ARGS", nargs="?", default="{}",
                      help="the arguments as a JSON object (default {})")
    call.add_argument("--timeout-ms", type=int, metavar="MS",
                      help="this call's timeout (default MEMPALACE_MCP_TIMEOUT_MS; 0 = none)")
    sub.add_parser("run", help='read {"tool", "arguments", "timeout_ms"} JSON lines on stdin; '
                   "print one JSON line per call")
    return parser


def parse_arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"JSON-ARGS is not JSON ({exc.msg} at column {exc.colno}); "
                         "pass an object such as '{\"limit\": 3}'") from None
    except (ValueError, RecursionError) as exc:  # too long a number, nested too deeply
        raise UsageError(f"JSON-ARGS is not JSON ({jsonrpc.decode_failure(exc)}); "
                         "pass an object such as '{\"limit\": 3}'") from None
    if not isinstance(value, dict):
        raise UsageError("JSON-ARGS must be a JSON object such as '{\"limit\": 3}'")
    return value


def exit_code(error: BaseException) -> int:
    if isinstance(error, PalaceToolError):
        return EXIT_TOOL
    if isinstance(error, PalaceAuthError):
        return EXIT_AUTH
    if isinstance(error, PalaceUnavailable):
        return EXIT_UNAVAILABLE
    if isinstance(error, PalaceTimeout):
        return EXIT_TIMEOUT
    return EXIT_OTHER


def error_json(error: BaseException) -> dict[str, Any]:
    data: dict[str, Any] = {"type": type(error).__name__, "message": describe(error)}
    for name in ("code", "status", "timeout_ms", "method"):
        value = getattr(error, name, None)
        if value not in (None, ""):
            data[name] = value
    if isinstance(error, PalaceToolError) and error.data is not None:
        data["data"] = error.data
    return data


def error_line(error: BaseException) -> str:
    """One line for stderr: the error, plus a tool error's ``data.reason`` (a lock holder's
    PID, say), which the message alone does not carry."""
    line = describe(error)
    data = error.data if isinstance(error, PalaceToolError) else None
    reason = data.get("reason") if isinstance(data, dict) else data
    if isinstance(reason, str) and reason.strip() and reason.strip() not in line:
        line += f" ({' '.join(reason.split())})"
    return line


def _unavailable(client: PalaceClient) -> int:
    """The palace did not start: say where and why in one line (the bridge's own notice names
    mempalace-mcp, which is no help for a remote one), and exit by the cause."""
    error = client.start_error
    where = (f"remote palace {client.config.remote_url}" if client.remote
             else "local palace (mempalace-mcp)")
    if isinstance(error, PalaceUnavailable) and error.detail:
        why = error.detail  # its message would say "unavailable" twice
    else:
        why = error_line(error) if error is not None else "it did not start"
    hint = ("; check MEMPALACE_REMOTE_TOKEN" if isinstance(error, PalaceAuthError)
            and "MEMPALACE_REMOTE_TOKEN" not in why else "")
    print(f"palace-bridge: {where} unavailable: {why}{hint}", file=sys.stderr)
    return EXIT_AUTH if isinstance(error, PalaceAuthError) else EXIT_UNAVAILABLE


def _print(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False), flush=True)


async def _tools(client: PalaceClient) -> int:
    if not await client.start():
        return _unavailable(client)
    _print([spec.to_json() for spec in await client.tools()])
    return EXIT_OK


async def _call(client: PalaceClient, tool: str, arguments: dict[str, Any],
                timeout_ms: int | None) -> int:
    if not await client.start():
        return _unavailable(client)
    try:
        result = await client.call_tool(tool, arguments, timeout_ms=timeout_ms)
    except PalaceError as exc:
        print(f"palace-bridge: {error_line(exc)}", file=sys.stderr)
        return exit_code(exc)
    _print(result.raw)
    if result.is_error:
        print(f"palace-bridge: {tool} returned isError: {result.text[:200]}", file=sys.stderr)
        return EXIT_TOOL
    return EXIT_OK


async def _run(client: PalaceClient) -> int:
    """Several calls on one client (so respawns and session renewals are observable)."""
    started = await client.start()
    worst = EXIT_OK if started else _unavailable(client)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
                raise ValueError
            arguments = item.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise ValueError
        except (ValueError, RecursionError):  # RecursionError: JSON nested too deeply
            _print({"ok": False, "error": {"type": "UsageError", "message":
                    'each line must be {"tool": NAME, "arguments": {...}}'}})
            worst = max(worst, EXIT_USAGE)
            continue
        try:
            result = await client.call_tool(item["tool"], arguments,
                                            timeout_ms=item.get("timeout_ms"))
        except PalaceError as exc:
            _print({"ok": False, "error": error_json(exc), "child_pids": client.child_pids})
            worst = max(worst, exit_code(exc))
            continue
        _print({"ok": not result.is_error, "result": result.raw, "child_pids": client.child_pids})
        if result.is_error:
            worst = max(worst, EXIT_TOOL)
    return worst


async def _main(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    for warning in BridgeConfig.from_env(env).warnings:
        print(warning, file=sys.stderr)
    client = create_client(env, stderr=sys.stderr)
    try:
        if args.command == "tools":
            return await _tools(client)
        if args.command == "call":
            return await _call(client, args.tool, parse_arguments(args.arguments),
                               args.timeout_ms)
        return await _run(client)
    finally:
        await client.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "timeout_ms", None) is not None and args.timeout_ms < 0:
        print("palace-bridge: --timeout-ms must be >= 0 (0 = no timeout)", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "call":
        try:
            parse_arguments(args.arguments)
        except UsageError as exc:
            print(f"palace-bridge: {exc}", file=sys.stderr)
            return EXIT_USAGE
    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `palace-bridge call ... | head`: the reader had what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's last flush cannot raise
        os.close(devnull)
        return 141  # 128 + SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
