/**
 * JSON-RPC 2.0 without I/O: newline framing, message classification, strict correlation (a
 * response matches only the exact id sent, of the same JSON type; unknown ids are ignored).
 */
import { isRecord } from "./config.ts";

export const DEFAULT_MAX_LINE = 64 * 1024 * 1024;

export interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}

export type Message =
  | { kind: "response"; id: unknown; result?: unknown; error?: RpcError }
  | { kind: "request"; id: string | number; method: string; params: unknown }
  | { kind: "notification"; method: string; params: unknown }
  | { kind: "invalid"; reason: string; raw: string };

export function request(id: number, method: string, params?: Record<string, unknown>): Record<string, unknown> {
  return params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };
}

export function notification(method: string, params?: Record<string, unknown>): Record<string, unknown> {
  return params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params };
}

/** One message as one line (JSON.stringify escapes newlines, so none is embedded). */
export function encode(message: unknown): string {
  return JSON.stringify(message) + "\n";
}

const validId = (value: unknown): value is string | number =>
  typeof value === "string" || (typeof value === "number" && Number.isInteger(value));

/** The answer to a server-to-client request: ping gets {}, anything else -32601 at once. */
export function answerServerRequest(id: string | number, method: string): Record<string, unknown> {
  if (method === "ping") return { jsonrpc: "2.0", id, result: {} };
  return { jsonrpc: "2.0", id, error: { code: -32601, message: `Method not found: ${method}` } };
}

export function classify(data: unknown, raw: string): Message {
  if (!isRecord(data)) return { kind: "invalid", reason: "not a JSON-RPC object (batches are not used by this client)", raw };
  if (typeof data.method === "string") {
    if ("id" in data && data.id !== null && data.id !== undefined) {
      if (!validId(data.id)) return { kind: "invalid", reason: "request id is neither a string nor an integer", raw };
      return { kind: "request", id: data.id, method: data.method, params: data.params };
    }
    return { kind: "notification", method: data.method, params: data.params };
  }
  if ("error" in data) {
    const error = data.error;
    if (!isRecord(error) || typeof error.code !== "number" || !Number.isInteger(error.code)) {
      return { kind: "invalid", reason: "error response without an integer error code", raw };
    }
    const normal: RpcError = { code: error.code, message: typeof error.message === "string" ? error.message : String(error.message) };
    if ("data" in error) normal.data = error.data;
    return { kind: "response", id: data.id, error: normal };
  }
  if ("result" in data) return { kind: "response", id: data.id, result: data.result };
  return { kind: "invalid", reason: "neither a request, a notification nor a response", raw };
}

/** Decode one framed line; bad JSON is "invalid", never an exception (STDIO-13). */
export function parse(line: string): Message {
  let data: unknown;
  try {
    data = JSON.parse(line);
  } catch (error) {
    return { kind: "invalid", reason: `not JSON (${error instanceof Error ? error.message : String(error)})`, raw: line.slice(0, 200) };
  }
  return classify(data, line.slice(0, 200));
}

/** A key that tells 1 from "1". */
export function idKey(id: unknown): string | undefined {
  return validId(id) ? `${typeof id}:${String(id)}` : undefined;
}

export class LineTooLong extends Error {}

/** Splits a byte stream into lines; blank lines skipped, a trailing \r dropped, size capped. */
export class LineDecoder {
  private buffer: Buffer = Buffer.alloc(0);
  private readonly maxLine: number;

  constructor(maxLine = DEFAULT_MAX_LINE) {
    this.maxLine = maxLine;
  }

  feed(chunk: Buffer): string[] {
    let searchFrom = this.buffer.length;
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    const lines: string[] = [];
    let start = 0;
    for (;;) {
      const end = this.buffer.indexOf(0x0a, Math.max(start, searchFrom));
      if (end < 0) break;
      let line = this.buffer.subarray(start, end).toString("utf8");
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line.trim()) lines.push(line);
      start = end + 1;
      searchFrom = start;
    }
    this.buffer = this.buffer.subarray(start);
    if (this.buffer.length > this.maxLine) {
      const size = this.buffer.length;
      this.buffer = Buffer.alloc(0);
      throw new LineTooLong(`a message grew past ${this.maxLine} bytes without a newline (${size} bytes buffered)`);
    }
    return lines;
  }

  get pending(): number {
    return this.buffer.length;
  }
}
