// Wire pieces the real-world test bridges share: JSON-RPC messages over newline-delimited stdio
// and over Streamable HTTP (a JSON body or an SSE stream read per the SSE standard, resumed with
// Last-Event-ID when it ends before the answer), the MCP handshake with tools/list pages, the
// refusal of server requests a client without capabilities cannot serve, and errors that keep
// what the server said.
//
// No bridge policy lives here: timeouts, kills, respawns, retries, sessions and logging are each
// bridge's own business (and where their planted defects are); the bridge hands readAnswer its
// call's signal and the requests it sends back. Nothing in this file is defective on purpose.

import { setTimeout as delay } from "node:timers/promises";

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

/** What an event stream said about resuming it: its last event id and its retry time, if any. */
export interface SseStreamState {
  lastEventId: string;
  retryMs?: number;
}

/**
 * Splits decoded text into SSE lines as they arrive: CRLF, LF or a lone CR ends a line (the SSE
 * standard), a line may run over several reads, and a CR ending one read may have its LF open the
 * next (one line end, not two).
 */
export function sseLineSplitter(): (chunk: string) => string[] {
  let unterminated = "";
  let afterCR = false;
  return (chunk) => {
    if (chunk === "") return [];
    if (afterCR && chunk.startsWith("\n")) chunk = chunk.slice(1);
    afterCR = chunk.endsWith("\r");
    const lines = chunk.split(/\r\n|\r|\n/);
    lines[0] = unterminated + lines[0];
    unterminated = lines.pop() ?? "";
    return lines;
  };
}

/**
 * The JSON-RPC messages of an SSE body, as they arrive, read per the SSE standard: only events of
 * type `message` (or with no `event:` field) carry them; comments, unknown fields, empty events
 * and data that is not one JSON-RPC message are skipped. `state` keeps the last event id and the
 * server's `retry`, for resuming the stream.
 */
export async function* sseMessages(body: ReadableStream<Uint8Array>,
  state: SseStreamState = { lastEventId: "" }): AsyncGenerator<RpcMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const split = sseLineSplitter();
  let eventType = "";
  let data: string[] = [];
  let idBuffer = state.lastEventId;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return; // an event not ended by an empty line is discarded
      for (const line of split(decoder.decode(value, { stream: true }))) {
        if (line === "") {
          state.lastEventId = idBuffer;
          const type = eventType;
          const message = data.length ? parseMessage(data.join("\n")) : undefined;
          eventType = "";
          data = [];
          if (message && (type === "" || type === "message")) yield message;
          continue;
        }
        if (line.startsWith(":")) continue; // a comment (keep-alive)
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") eventType = text;
        else if (field === "data") data.push(text);
        else if (field === "id" && !text.includes("\0")) idBuffer = text;
        else if (field === "retry" && /^[0-9]+$/.test(text)) state.retryMs = Number(text);
      }
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
}

/** The answer to a request the server sent the client: `ping` is served, anything else refused. */
export function answerServerRequest(request: RpcMessage): RpcMessage {
  return request.method === "ping"
    ? { jsonrpc: "2.0", id: request.id, result: {} }
    : { jsonrpc: "2.0", id: request.id, error: { code: -32601, message: `Method not found: ${request.method}` } };
}

/** Is this message a request from the server (a method and an id)? */
export function isServerRequest(message: RpcMessage): boolean {
  return typeof message.method === "string" && message.id !== undefined && message.id !== null;
}

/** How `readAnswer` talks back to the server while it waits for an answer. */
export interface AnswerOptions {
  /** Sends GET with `Last-Event-ID` (and the session headers) to resume an event stream. */
  resume?: (lastEventId: string) => Promise<Response>;
  /** Posts a message to the server: the answer to a request it sent inside the stream. */
  reply?: (message: RpcMessage) => Promise<void>;
  /** The call's signal: aborting it ends the wait before a resumption too. */
  signal?: AbortSignal;
}

/** Resumptions of one answer after the first stream: a bound for calls without a deadline. */
export const MAX_RESUMES = 3;
/** The wait before resuming when the server sent no `retry` (the spec leaves it to the client). */
export const DEFAULT_RETRY_MS = 1_000;

/**
 * The answer with `id` from an event stream, resumed as MCP Streamable HTTP says when it ends
 * first ("Resumability and Redelivery"): after the server's `retry`, a GET with the last event
 * id, whose answer must be a 2xx event stream. A stream with no event id cannot be resumed.
 */
async function answerFromStream(response: Response, id: number, options: AnswerOptions): Promise<RpcMessage> {
  const state: SseStreamState = { lastEventId: "" };
  for (let resumes = 0; ; resumes++) {
    if (!response.body) throw new ProtocolError("the event stream has no body");
    for await (const message of sseMessages(response.body, state)) {
      if (isAnswer(message) && message.id === id) return message;
      if (isServerRequest(message)) await options.reply?.(answerServerRequest(message)).catch(() => undefined);
    }
    if (!state.lastEventId) throw new ProtocolError("the event stream ended without the answer and with no event id to resume from");
    if (!options.resume) throw new ProtocolError("the event stream ended without the answer");
    if (resumes >= MAX_RESUMES) throw new ProtocolError(`the event stream ended without the answer after ${MAX_RESUMES} resumptions`);
    await delay(state.retryMs ?? DEFAULT_RETRY_MS, undefined, { signal: options.signal });
    response = await options.resume(state.lastEventId);
    const type = response.headers.get("content-type") ?? "";
    if (!response.ok || !type.includes("text/event-stream")) {
      await response.body?.cancel().catch(() => undefined);
      throw new ProtocolError(`resuming the event stream was answered HTTP ${response.status} (${type || "no content type"})`);
    }
  }
}

/**
 * The answer with `id` from an HTTP response body (application/json or text/event-stream). Server
 * requests inside an event stream are answered through `options.reply`; a stream that ends early is
 * resumed through `options.resume`.
 */
export async function readAnswer(response: Response, id: number, options: AnswerOptions = {}): Promise<RpcMessage> {
  const type = response.headers.get("content-type") ?? "";
  try {
    if (type.includes("text/event-stream") && response.body) return await answerFromStream(response, id, options);
    if (type.includes("application/json")) {
      const message = parseMessage(await response.text());
      if (message && isAnswer(message) && message.id === id) return message;
      throw new ProtocolError("the JSON body is not the answer to the request");
    }
  } catch (error) {
    if (error instanceof ProtocolError || error instanceof ConnectionClosedError) throw error;
    if ((error as Error)?.name === "AbortError" || options.signal?.aborted) throw error;
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
