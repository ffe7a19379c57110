// configfile: a pi <-> MemPalace bridge of the "settings file" family, for a remote palace only.
//
// Everything comes from ~/.pi/agent/mempalace.json, the way pi users keep per-extension settings
// (pi has no env block, and a GUI-launched pi does not read shell rc files):
//
//   {"url": "https://palace.example/mcp", "token": "...", "timeoutMs": 60000,
//    "initTimeoutMs": 300000, "debug": false}
//
// Without a "token" the first line of ~/.mempalace/token is used (where `mempalace serve` keeps
// the one it minted). MEMPALACE_REMOTE_URL and MEMPALACE_REMOTE_TOKEN are never read: a bridge
// configured by file must not be re-pointed by a stray export. Numbers may be given as strings;
// an empty value means the default. There is no local palace and no fallback to one.
//
// PLANTED DEFECTS:
// HTTP-04: a 404 on a request that carried a session id drops the session and fails the call; only the next call re-initializes
// HTTP-09: a tools/call answered with a 5xx or cut off by a reset is sent again (up to twice more), so a write can land twice

import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  ConnectionClosedError, handshake, ProtocolError, readAnswer, RpcError, sleep, unwrap, type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

const CONNECT_ATTEMPTS = 3;

interface Settings { url: string; token?: string; timeoutMs: number; initTimeoutMs: number; debug: boolean }

function millis(value: unknown, fallback: number): number {
  if (value === undefined || value === null || value === "") return fallback;
  const number = Number(value);
  return Number.isInteger(number) && number >= 0 ? number : fallback;
}

/** The settings, or a one-line reason why there are none. */
function readSettings(): Settings | string {
  const file = path.join(os.homedir(), ".pi", "agent", "mempalace.json");
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === "ENOENT" ? `no palace configured (${file} does not exist)` : `cannot read ${file}: ${(error as Error).message}`;
  }
  const url = typeof raw.url === "string" ? raw.url.trim() : "";
  if (!url) return `${file} has no "url"`;
  let token = typeof raw.token === "string" ? raw.token.trim() : "";
  if (!token) {
    try {
      token = readFileSync(path.join(os.homedir(), ".mempalace", "token"), "utf8").split("\n")[0].trim();
    } catch { /* no token file: an open palace */ }
  }
  return {
    url, token: token || undefined,
    timeoutMs: millis(raw.timeoutMs, 60_000), initTimeoutMs: millis(raw.initTimeoutMs, 300_000),
    debug: raw.debug === true || raw.debug === "1" || raw.debug === "true",
  };
}

class HttpStatusError extends Error {
  constructor(readonly status: number, what: string) {
    super(status === 401 || status === 403 ? `the palace refused the token (${what})` : `the palace answered ${what}`);
    this.name = "HttpStatusError";
  }
}

class SessionExpiredError extends Error {
  constructor() {
    super("mempalace session expired; a new one is started on the next call");
    this.name = "SessionExpiredError";
  }
}

class TimeoutError extends Error {
  constructor(method: string, ms: number) {
    super(`mempalace ${method} timed out after ${ms} ms`);
    this.name = "TimeoutError";
  }
}

class Remote {
  tools: McpTool[] = [];
  private session?: string;
  private version?: string;
  private stateful = false;
  private nextId = 1;

  constructor(private readonly settings: Settings) {}

  /** The handshake, retried a few times: a palace restarting or a network blip is common. */
  async connect(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        this.session = undefined;
        this.version = undefined;
        const deadline = Date.now() + this.settings.initTimeoutMs;
        const left = () => (this.settings.initTimeoutMs === 0 ? 0 : Math.max(1, deadline - Date.now()));
        this.tools = await handshake((method, params) => this.request(method, params, left()),
          (method) => this.notify(method), "configfile-bridge");
        return;
      } catch (error) {
        this.log(`connect attempt ${attempt} failed: ${(error as Error).message}`);
        if (attempt >= CONNECT_ATTEMPTS) throw error;
        await sleep(250 * 2 ** (attempt - 1));
      }
    }
  }

  async call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    if (this.stateful && !this.session) await this.connect();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.request("tools/call", { name, arguments: args }, this.settings.timeoutMs) as ToolResult;
      } catch (error) {
        const transient = (error instanceof HttpStatusError && error.status >= 500) || error instanceof ConnectionClosedError;
        if (!transient || attempt >= 3) throw error;
        this.log(`${name} failed (${(error as Error).message}); retrying`);
        await sleep(200 * attempt);
      }
    }
  }

  async close(): Promise<void> {
    if (!this.session) return;
    await fetch(this.settings.url, { method: "DELETE", headers: this.headers(), signal: AbortSignal.timeout(2_000) })
      .then((response) => response.body?.cancel(), () => undefined);
    this.session = undefined;
  }

  private headers(): Record<string, string> {
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    if (this.settings.token) headers.authorization = `Bearer ${this.settings.token}`;
    if (this.session) headers["mcp-session-id"] = this.session;
    if (this.version) headers["mcp-protocol-version"] = this.version;
    return headers;
  }

  /** A notification: the server must accept it (MCP: 202); any other answer is a refusal. */
  private async notify(method: string, params?: Record<string, unknown>): Promise<void> {
    const status = await this.post({ jsonrpc: "2.0", method, ...(params ? { params } : {}) });
    if (status !== undefined && !(status >= 200 && status < 300)) throw new ProtocolError(`${method} was refused: HTTP ${status}`);
  }

  /** A notification or an answer to the server: nothing to wait for but the 202. Its status. */
  private async post(message: RpcMessage): Promise<number | undefined> {
    const body = JSON.stringify(message);
    const response = await fetch(this.settings.url, { method: "POST", headers: this.headers(), body, signal: AbortSignal.timeout(5_000) })
      .catch(() => undefined);
    await response?.body?.cancel().catch(() => undefined);
    return response?.status;
  }

  /** GET with Last-Event-ID: the event stream of an answer, resumed (MCP Streamable HTTP). */
  private resume(lastEventId: string, signal: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { ...this.headers(), accept: "text/event-stream", "last-event-id": lastEventId };
    delete headers["content-type"]; // a GET has no body
    return fetch(this.settings.url, { method: "GET", headers, signal })
      .catch((error) => { throw signal.aborted ? error : new ConnectionClosedError(causeOf(error)); });
  }

  private async request(method: string, params: Record<string, unknown> | undefined, timeoutMs: number): Promise<unknown> {
    const id = this.nextId++;
    const sentSession = this.session;
    const abort = new AbortController();
    const timer = timeoutMs > 0 ? setTimeout(() => abort.abort(), timeoutMs) : undefined;
    try {
      const body = JSON.stringify({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
      const response = await fetch(this.settings.url, { method: "POST", headers: this.headers(), body, signal: abort.signal })
        .catch((error) => { throw abort.signal.aborted ? error : new ConnectionClosedError(causeOf(error)); });
      this.log(`${method} -> HTTP ${response.status}`);
      if (response.status === 404 && sentSession) {
        await response.body?.cancel();
        this.session = undefined;
        throw new SessionExpiredError();
      }
      if (!response.ok || response.status === 202) {
        await response.body?.cancel();
        throw new HttpStatusError(response.status, `HTTP ${response.status} to ${method}`);
      }
      if (method === "initialize") {
        this.session = response.headers.get("mcp-session-id") ?? undefined;
        this.stateful = this.session !== undefined;
      }
      const result = unwrap(await readAnswer(response, id, {
        signal: abort.signal,
        resume: (lastEventId) => this.resume(lastEventId, abort.signal),
        reply: async (message) => { await this.post(message); },
      }));
      if (method === "initialize") this.version = (result as { protocolVersion?: string }).protocolVersion;
      return result;
    } catch (error) {
      if (!abort.signal.aborted) throw error;
      if (method !== "initialize") void this.notify("notifications/cancelled", { requestId: id, reason: "timed out" });
      throw new TimeoutError(method, timeoutMs);
    } finally {
      clearTimeout(timer);
    }
  }

  private log(line: string): void {
    if (this.settings.debug) console.error(`configfile: ${line}`);
  }
}

/** The value with the token replaced wherever it occurs, at any depth. */
function redacted<T>(value: T, token: string | undefined): T {
  if (!token) return value;
  if (typeof value === "string") return value.split(token).join("[redacted]") as T;
  if (Array.isArray(value)) return value.map((item) => redacted(item, token)) as T;
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, redacted(item, token)])) as T;
  }
  return value;
}

function causeOf(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (error as Error)?.message ?? String(error);
}

export default function configfile(pi: ExtensionAPI) {
  const settings = readSettings();
  let remote: Remote | undefined;

  pi.on("session_start", async () => {
    if (remote) return;
    if (typeof settings === "string") {
      console.error(`configfile: ${settings}; continuing without palace tools`);
      return;
    }
    const connecting = new Remote(settings);
    try {
      await connecting.connect();
    } catch (error) {
      console.error(`configfile: mempalace-mcp unavailable after retries; continuing without palace tools (${(error as Error).message})`);
      return;
    }
    remote = connecting;
    for (const tool of connecting.tools) {
      pi.registerTool({
        name: tool.name,
        label: tool.name,
        description: tool.description ?? "",
        parameters: Type.Unsafe(tool.inputSchema),
        async execute(_id, params) {
          const result = await connecting.call(tool.name, params as Record<string, unknown>).catch((error) => {
            // a server or proxy may echo the bearer token in an error: the agent never sees it
            throw error instanceof RpcError
              ? new RpcError(error.code, redacted(error.message, settings.token), redacted(error.data, settings.token))
              : error;
          });
          return { content: (result.content ?? []) as never, details: undefined, isError: Boolean(result.isError) };
        },
      });
    }
  });

  pi.on("session_shutdown", async () => {
    await remote?.close();
  });
}
