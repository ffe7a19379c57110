/**
 * The MCP handshake of the local child: initialize, notifications/initialized, tools/list following
 * nextCursor (LIFE-04). Nothing else is sent before it ends. (The remote session's handshake is
 * pi-mcp's McpClient.connect + listTools; the two accept the same protocol versions.)
 */
import { isRecord } from "./config.ts";
import type { Deadline } from "./deadline.ts";
import { PalaceProtocolError, PalaceToolError } from "./errors.ts";
import type { RpcError } from "./jsonrpc.ts";
import type { Log } from "./log.ts";
import { type ToolSpec, toolSpecFromWire } from "./tools.ts";

export const PROTOCOL_VERSION = "2025-11-25";
export const SUPPORTED_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
export const CLIENT_INFO = { name: "palace-bridge-pi", version: "0.1.0" };
const MAX_PAGES = 100;

export interface RpcReply {
  result?: unknown;
  error?: RpcError;
}

export type Send = (method: string, params: Record<string, unknown> | undefined, deadline: Deadline) => Promise<RpcReply>;

export function initializeParams(): Record<string, unknown> {
  return { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: CLIENT_INFO };
}

/** Validate the initialize answer; a version this client does not speak ends the connect. */
export function checkInitialize(reply: RpcReply): string {
  if (reply.error) throw new PalaceToolError(reply.error.code, reply.error.message, reply.error.data, "initialize");
  const result = reply.result;
  if (!isRecord(result) || typeof result.protocolVersion !== "string") {
    throw new PalaceProtocolError("initialize result has no protocolVersion");
  }
  if (!SUPPORTED_VERSIONS.includes(result.protocolVersion)) {
    throw new PalaceProtocolError(`server chose protocol version '${result.protocolVersion}'; this client speaks ${SUPPORTED_VERSIONS.join(", ")}`);
  }
  return result.protocolVersion;
}

/** Every page of tools/list; cursors are opaque and passed back unchanged. */
export async function listTools(send: Send, deadline: Deadline, log: Log): Promise<ToolSpec[]> {
  const tools: ToolSpec[] = [];
  const seen = new Set<string>();
  let cursor: unknown;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const reply = await send("tools/list", cursor === undefined ? undefined : { cursor }, deadline);
    if (reply.error) throw new PalaceToolError(reply.error.code, reply.error.message, reply.error.data, "tools/list");
    const result = reply.result;
    if (!isRecord(result) || !Array.isArray(result.tools)) throw new PalaceProtocolError("tools/list result has no 'tools' list");
    for (const entry of result.tools) {
      if (isRecord(entry) && typeof entry.name === "string" && entry.name) tools.push(toolSpecFromWire(entry));
      else log.debug(`skipping a tools/list entry without a name: ${JSON.stringify(entry)?.slice(0, 120)}`);
    }
    cursor = result.nextCursor ?? undefined;
    if (cursor === undefined) return tools;
    const marker = JSON.stringify(cursor);
    if (seen.has(marker)) throw new PalaceProtocolError(`tools/list repeated the cursor ${marker}; stopping`);
    seen.add(marker);
  }
  throw new PalaceProtocolError(`tools/list did not end after ${MAX_PAGES} pages`);
}
