// curated: a pi <-> MemPalace bridge of the "curated tool set" family, for a remote palace.
//
// Forty-seven palace tools crowd the model's context, so this bridge offers three, under names
// of its own, each forwarding to one palace tool with the palace's own input schema (taken from
// tools/list, so the parameters stay exactly the server's):
//
//   palace_search -> mempalace_search    palace_save -> mempalace_add_drawer
//   palace_status -> mempalace_status
//
// plus one local tool, palace_where, that says which palace the session talks to (no call).
// Configuration is the seed's: MEMPALACE_REMOTE_URL (required; there is no local palace),
// MEMPALACE_REMOTE_TOKEN, MEMPALACE_MCP_TIMEOUT_MS (60000), MEMPALACE_MCP_INIT_TIMEOUT_MS (300000),
// MEMPALACE_EXT_DEBUG=1.
//
// PLANTED DEFECTS:
// HTTP-01: the token is never redacted: with MEMPALACE_EXT_DEBUG=1 every request is logged with its headers, and an error that echoes it is passed on
// HTTP-08: a 401 in the middle of a session is taken for a stale session: the bridge re-initializes and sends the call again

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  ConnectionClosedError, handshake, ProtocolError, readAnswer, sleep, unwrap, type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

const CURATED: Record<string, { palace: string; description: string }> = {
  palace_search: { palace: "mempalace_search", description: "Search long-term memory (MemPalace) by meaning." },
  palace_save: { palace: "mempalace_add_drawer", description: "File a memory into a wing and room of the palace." },
  palace_status: { palace: "mempalace_status", description: "Palace overview: drawer counts, wings, rooms." },
};

function millis(name: string, fallback: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (Number.isInteger(value) && value >= 0) return value;
  console.error(`curated: ignoring ${name}=${JSON.stringify(raw)} (not a non-negative integer); using ${fallback}`);
  return fallback;
}

class HttpStatusError extends Error {
  constructor(readonly status: number, method: string) {
    super(status === 401 || status === 403 ? `the palace refused the credentials (HTTP ${status} to ${method})`
      : `the palace answered HTTP ${status} to ${method}`);
    this.name = "HttpStatusError";
  }
}

class SessionExpiredError extends Error {
  constructor() {
    super("mempalace session lost: the server forgot the replacement session too");
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
  connected = false;
  private session?: string;
  private version?: string;
  private stateful = false;
  private nextId = 1;
  private renewing?: Promise<void>;
  private readonly timeoutMs = millis("MEMPALACE_MCP_TIMEOUT_MS", 60_000);
  private readonly initTimeoutMs = millis("MEMPALACE_MCP_INIT_TIMEOUT_MS", 300_000);
  private readonly debug = process.env.MEMPALACE_EXT_DEBUG === "1";

  constructor(readonly url: string, private readonly token?: string) {}

  async connect(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        this.tools = await this.open(true);
        this.connected = true;
        return;
      } catch (error) {
        if (attempt >= 3) throw error;
        await sleep(250 * 2 ** (attempt - 1));
      }
    }
  }

  async call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    if (this.stateful && !this.session) await this.open(false);
    return await this.request("tools/call", { name, arguments: args }, this.timeoutMs) as ToolResult;
  }

  async close(): Promise<void> {
    if (!this.session) return;
    await fetch(this.url, { method: "DELETE", headers: this.headers(), signal: AbortSignal.timeout(2_000) })
      .then((response) => response.body?.cancel(), () => undefined);
    this.session = undefined;
  }

  /** A new session in place of `lost`, opened once however many requests saw `lost` die. */
  private async renew(lost: string): Promise<void> {
    if (this.session !== undefined && this.session !== lost) return; // someone else renewed it
    this.renewing ??= this.open(false).then(() => undefined).finally(() => { this.renewing = undefined; });
    await this.renewing;
  }

  /** A new session: initialize and initialized, and the tool list when asked for. */
  private async open(listTools: boolean): Promise<McpTool[]> {
    this.session = undefined;
    this.version = undefined;
    const deadline = Date.now() + this.initTimeoutMs;
    const left = () => (this.initTimeoutMs === 0 ? 0 : Math.max(1, deadline - Date.now()));
    const send = (method: string, params?: Record<string, unknown>) =>
      (!listTools && method === "tools/list" ? Promise.resolve({ tools: [] }) : this.request(method, params, left(), true));
    return handshake(send, (method) => this.notify(method), "curated-bridge");
  }

  private headers(): Record<string, string> {
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
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
    const response = await fetch(this.url, { method: "POST", headers: this.headers(), body, signal: AbortSignal.timeout(5_000) })
      .catch(() => undefined);
    await response?.body?.cancel().catch(() => undefined);
    return response?.status;
  }

  /** GET with Last-Event-ID: the event stream of an answer, resumed (MCP Streamable HTTP). */
  private resume(lastEventId: string, signal: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { ...this.headers(), accept: "text/event-stream", "last-event-id": lastEventId };
    delete headers["content-type"]; // a GET has no body
    return fetch(this.url, { method: "GET", headers, signal })
      .catch((error) => { throw signal.aborted ? error : new ConnectionClosedError(causeOf(error)); });
  }

  private async request(method: string, params: Record<string, unknown> | undefined, timeoutMs: number,
    retried = false): Promise<unknown> {
    const id = this.nextId++;
    const sentSession = this.session;
    const abort = new AbortController();
    const timer = timeoutMs > 0 ? setTimeout(() => abort.abort(), timeoutMs) : undefined;
    const headers = this.headers();
    if (this.debug) console.error(`curated: POST ${this.url} ${method} ${JSON.stringify(headers)}`);
    try {
      const body = JSON.stringify({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
      const response = await fetch(this.url, { method: "POST", headers, body, signal: abort.signal })
        .catch((error) => { throw abort.signal.aborted ? error : new ConnectionClosedError(causeOf(error)); });
      if (response.status === 404 && sentSession) {
        await response.body?.cancel();
        if (retried || method === "initialize") {
          if (this.session === sentSession) this.session = undefined;
          throw new SessionExpiredError();
        }
        await this.renew(sentSession);
        return await this.request(method, params, timeoutMs, true);
      }
      if (response.status === 401 && method !== "initialize" && !retried) {
        await response.body?.cancel();
        await this.open(false);
        return await this.request(method, params, timeoutMs, true);
      }
      if (!response.ok || response.status === 202) {
        await response.body?.cancel();
        throw new HttpStatusError(response.status, method);
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
}

function causeOf(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  return cause?.code ?? cause?.message ?? (error as Error)?.message ?? String(error);
}

/** The URL without credentials or query, fit to show. */
function shown(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return "(an invalid URL)";
  }
}

export default function curated(pi: ExtensionAPI) {
  const url = process.env.MEMPALACE_REMOTE_URL?.trim();
  const remote = url ? new Remote(url, process.env.MEMPALACE_REMOTE_TOKEN?.trim() || undefined) : undefined;
  let started = false;

  pi.registerTool({
    name: "palace_where",
    label: "palace_where",
    description: "Which MemPalace this session uses, and whether it is connected.",
    parameters: Type.Object({}),
    async execute() {
      const text = remote ? `palace: ${shown(remote.url)} (${remote.connected ? "connected" : "not connected"})`
        : "palace: none (MEMPALACE_REMOTE_URL is not set)";
      return { content: [{ type: "text", text }], details: undefined };
    },
  });

  pi.on("session_start", async () => {
    if (started) return;
    started = true;
    if (!remote) {
      console.error("curated: MEMPALACE_REMOTE_URL is not set; continuing without palace tools");
      return;
    }
    try {
      await remote.connect();
    } catch (error) {
      console.error(`curated: mempalace-mcp unavailable after retries; continuing without palace tools (${(error as Error).message})`);
      return;
    }
    for (const [name, { palace, description }] of Object.entries(CURATED)) {
      const tool = remote.tools.find((candidate) => candidate.name === palace);
      if (!tool) continue;
      pi.registerTool({
        name,
        label: name,
        description,
        parameters: Type.Unsafe(tool.inputSchema),
        async execute(_id, params) {
          const result = await remote.call(palace, params as Record<string, unknown>);
          return { content: (result.content ?? []) as never, details: undefined, isError: Boolean(result.isError) };
        },
      });
    }
  });

  pi.on("session_shutdown", async () => {
    await remote?.close();
  });
}
