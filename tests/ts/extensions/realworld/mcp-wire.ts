// Wire pieces the real-world test bridges share: JSON-RPC messages over newline-delimited stdio
// and over Streamable HTTP (a JSON body or an SSE stream), the MCP handshake with tools/list
// pages, and errors that keep what the server said.
//
// No bridge policy lives here: timeouts, kills, respawns, retries, sessions and logging are each
// bridge's own business (and where their planted defects are). Nothing in this file is defective
// on purpose.

export const PROTOCOL_VERSION = "2025-06-18";

export interface RpcMessage {
  jsonrpc?: string;
  id?: string | number | null;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

export interface McpTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

export interface ToolResult {
  content?: Array<{ type: string; text?: string }>;
  isError?: boolean;
  structuredContent?: unknown;
}

/** A JSON-RPC error answer: code, message and data kept as the server sent them. */
export class RpcError extends Error {
  constructor(readonly code: number, message: string, readonly data?: unknown) {
    super(message);
    this.name = "RpcError";
  }
}

/** The answer broke the protocol (no result, wrong content type, ...). */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(`MCP protocol error: ${message}`);
    this.name = "ProtocolError";
  }
}

/** The connection went away before the answer came. */
export class ConnectionClosedError extends Error {
  constructor(detail: string) {
    super(`connection closed: ${detail}`);
    this.name = "ConnectionClosedError";
  }
}

/** One parsed JSON-RPC message, or undefined for junk (not JSON, not a single object). */
export function parseMessage(line: string): RpcMessage | undefined {
  try {
    const value = JSON.parse(line);
    return value && typeof value === "object" && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Is this message the answer to a request (a result or an error for an id)? */
export function isAnswer(message: RpcMessage): boolean {
  return message.id !== undefined && message.id !== null && ("result" in message || "error" in message);
}

/** The result of an answer; an error answer is thrown as RpcError. */
export function unwrap(message: RpcMessage): unknown {
  if (message.error) throw new RpcError(message.error.code, message.error.message, message.error.data);
  return message.result;
}

/** Feeds text chunks, calls `onLine` for every complete non-empty line (stdio framing). */
export function lineSplitter(onLine: (line: string) => void): (chunk: string) => void {
  let buffered = "";
  return (chunk) => {
    buffered += chunk;
    for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
      const line = buffered.slice(0, end).trim();
      buffered = buffered.slice(end + 1);
      if (line) onLine(line);
    }
  };
}

/** The JSON-RPC messages of an SSE body, as they arrive (comments and empty events skipped). */
export async function* sseMessages(body: ReadableStream<Uint8Array>): AsyncGenerator<RpcMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffered += decoder.decode(value, { stream: true });
      for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
        const line = buffered.slice(0, end).replace(/\r$/, "");
        buffered = buffered.slice(end + 1);
        if (line === "") {
          const message = data.length ? parseMessage(data.join("\n")) : undefined;
          data = [];
          if (message) yield message;
        } else if (line.startsWith("data:")) {
          data.push(line.slice(5).replace(/^ /, ""));
        }
      }
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}

/** The answer with `id` from an HTTP response body (application/json or text/event-stream). */
export async function readAnswer(response: Response, id: number): Promise<RpcMessage> {
  const type = response.headers.get("content-type") ?? "";
  try {
    if (type.includes("text/event-stream") && response.body) {
      for await (const message of sseMessages(response.body)) {
        if (isAnswer(message) && message.id === id) return message;
      }
      throw new ConnectionClosedError("the event stream ended without an answer");
    }
    if (type.includes("application/json")) {
      const message = parseMessage(await response.text());
      if (message && isAnswer(message) && message.id === id) return message;
      throw new ProtocolError("the JSON body is not the answer to the request");
    }
  } catch (error) {
    if (error instanceof ProtocolError || error instanceof ConnectionClosedError) throw error;
    if ((error as Error)?.name === "AbortError") throw error;
    throw new ConnectionClosedError(`reading the answer failed (${(error as Error)?.message ?? error})`);
  }
  await response.body?.cancel().catch(() => undefined);
  throw new ProtocolError(`unexpected content type ${JSON.stringify(type)} for an answer`);
}

export type Send = (method: string, params: Record<string, unknown> | undefined) => Promise<unknown>;
export type Notify = (method: string, params?: Record<string, unknown>) => Promise<void>;

/** initialize -> notifications/initialized -> every tools/list page (LIFE-04). */
export async function handshake(send: Send, notify: Notify, clientName: string): Promise<McpTool[]> {
  const init = await send("initialize", {
    protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: clientName, version: "1.0.0" },
  }) as { protocolVersion?: unknown } | undefined;
  if (typeof init?.protocolVersion !== "string") throw new ProtocolError("initialize result has no protocolVersion");
  await notify("notifications/initialized");
  const tools: McpTool[] = [];
  const seen = new Set<string>();
  let cursor: unknown;
  for (let page = 0; page < 100; page++) {
    const result = await send("tools/list", cursor === undefined ? undefined : { cursor }) as
      { tools?: McpTool[]; nextCursor?: unknown } | undefined;
    if (!Array.isArray(result?.tools)) throw new ProtocolError("tools/list result has no tools");
    tools.push(...result.tools.filter((tool) => typeof tool?.name === "string" && tool.name));
    cursor = result.nextCursor ?? undefined;
    if (cursor === undefined) return tools;
    const marker = JSON.stringify(cursor);
    if (seen.has(marker)) throw new ProtocolError(`tools/list repeated the cursor ${marker}`);
    seen.add(marker);
  }
  throw new ProtocolError("tools/list did not end after 100 pages");
}

/** The text parts of a tool result, joined. */
export function textOf(result: ToolResult | undefined): string {
  return (result?.content ?? []).filter((part) => part.type === "text").map((part) => part.text ?? "").join("\n");
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
