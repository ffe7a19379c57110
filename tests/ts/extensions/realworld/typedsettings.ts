// typedsettings: a pi <-> MemPalace bridge of the "typed settings file" family, remote palace only.
//
// Its settings file, ~/.config/palace-bridge/settings.json, is typed the way a settings UI writes
// it, with the server given in parts and the numbers as numbers:
//
//   {"server": {"scheme": "https", "host": "palace.example", "port": 8765, "path": "/mcp"},
//    "token": "...", "timeouts": {"callMs": 60000, "initMs": 300000}, "debug": false}
//
// It checks the types: a server part of the wrong type (a port given as "8765") leaves the palace
// unconfigured, with one line saying which; a timeout or debug of the wrong type is ignored with a
// warning (the default is used). Without a "token" the first line of ~/.mempalace/token is used.
// Environment variables are never read. There is no local palace and no fallback to one.
// Otherwise it is the settings-file bridge done right: a 404 on a session renews it once (shared
// by the calls in flight) and retries the call once; a tools/call is never sent twice.
//
// PLANTED DEFECTS:
// HTTP-11: a request that times out is abandoned without notifications/cancelled
// TOOL-04: a JSON-RPC error reaches the agent with its code and message but without its data

import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  ConnectionClosedError, handshake, ProtocolError, readAnswer, RpcError, sleep, unwrap, type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

const CONNECT_ATTEMPTS = 3;
const SETTINGS = [".config", "palace-bridge", "settings.json"];

interface Settings { url: string; token?: string; timeoutMs: number; initTimeoutMs: number; debug: boolean }

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** A timeout in ms: a non-negative integer number; anything else is ignored with a warning. */
function millis(where: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value === "number" && Number.isInteger(value) && value >= 0) return value;
  console.error(`typedsettings: ${where} must be a whole number of milliseconds, not ${JSON.stringify(value)}; using ${fallback}`);
  return fallback;
}

/** The settings, or a one-line reason why there are none. */
function readSettings(): Settings | string {
  const file = path.join(os.homedir(), ...SETTINGS);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === "ENOENT" ? `no palace configured (${file} does not exist)` : `cannot read ${file}: ${(error as Error).message}`;
  }
  if (!isObject(raw) || !isObject(raw.server)) return `${file} has no "server"`;
  const { scheme = "http", host, port, path: urlPath = "/mcp" } = raw.server;
  if (scheme !== "http" && scheme !== "https") return `${file}: server.scheme must be "http" or "https"`;
  if (typeof host !== "string" || !host) return `${file}: server.host must be a string`;
  if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535) {
    return `${file}: server.port must be a number from 1 to 65535, not ${JSON.stringify(port)}`;
  }
  if (typeof urlPath !== "string" || !urlPath.startsWith("/")) return `${file}: server.path must start with "/"`;
  let token = typeof raw.token === "string" ? raw.token.trim() : "";
  if (!token) {
    try {
      token = readFileSync(path.join(os.homedir(), ".mempalace", "token"), "utf8").split("\n")[0].trim();
    } catch { /* no token file: an open palace */ }
  }
  const timeouts = isObject(raw.timeouts) ? raw.timeouts : {};
  let debug = false;
  if (raw.debug !== undefined) {
    if (typeof raw.debug === "boolean") debug = raw.debug;
    else console.error(`typedsettings: debug must be true or false, not ${JSON.stringify(raw.debug)}; debug is off`);
  }
  const bracketed = host.includes(":") ? `[${host}]` : host;
  return {
    url: `${scheme}://${bracketed}:${port}${urlPath}`, token: token || undefined,
    timeoutMs: millis("timeouts.callMs", timeouts.callMs, 60_000),
    initTimeoutMs: millis("timeouts.initMs", timeouts.initMs, 300_000),
    debug,
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
    super("mempalace session expired again after it was renewed");
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
  private renewing?: Promise<void>;

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
          (method) => this.notify(method), "typedsettings-bridge");
        return;
      } catch (error) {
        this.log(`connect attempt ${attempt} failed: ${(error as Error).message}`);
        if (attempt >= CONNECT_ATTEMPTS) throw error;
        await sleep(250 * 2 ** (attempt - 1));
      }
    }
  }

  async call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    if (this.stateful && !this.session) await this.renew();
    return await this.request("tools/call", { name, arguments: args }, this.settings.timeoutMs) as ToolResult;
  }

  /** A new session for the one that answered 404: one handshake, shared by every call that met it. */
  private renew(): Promise<void> {
    this.renewing ??= this.connect().finally(() => { this.renewing = undefined; });
    return this.renewing;
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

  private async request(method: string, params: Record<string, unknown> | undefined, timeoutMs: number,
    retried = false): Promise<unknown> {
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
        clearTimeout(timer);
        if (retried) { // a second 404 fails the call; the session it names is dead too
          if (this.session === sentSession) this.session = undefined;
          throw new SessionExpiredError();
        }
        if (this.renewing || (this.session !== undefined && this.session !== sentSession)) {
          await this.renewing; // being replaced or replaced already: retried on the new one
          return await this.request(method, params, timeoutMs, true);
        }
        await this.renew();
        return await this.request(method, params, timeoutMs, true);
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
      // (PLANTED HTTP-11: no notifications/cancelled for the abandoned request)
      throw new TimeoutError(method, timeoutMs);
    } finally {
      clearTimeout(timer);
    }
  }

  private log(line: string): void {
    if (this.settings.debug) console.error(`typedsettings: ${line}`);
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

export default function typedsettings(pi: ExtensionAPI) {
  const settings = readSettings();
  let remote: Remote | undefined;

  pi.on("session_start", async () => {
    if (remote) return;
    if (typeof settings === "string") {
      console.error(`typedsettings: ${settings}; continuing without palace tools`);
      return;
    }
    const connecting = new Remote(settings);
    try {
      await connecting.connect();
    } catch (error) {
      console.error(`typedsettings: mempalace-mcp unavailable after retries; continuing without palace tools (${(error as Error).message})`);
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
            throw error instanceof RpcError // PLANTED TOOL-04: the data is left behind
              ? new RpcError(error.code, redacted(error.message, settings.token))
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
