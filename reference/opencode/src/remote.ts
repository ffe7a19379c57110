// The remote palace: MCP over streamable HTTP on the official SDK's `StreamableHTTPClientTransport`
// (LIFE-02, HTTP-01..11). Fail-closed: no local child, ever; a palace that cannot be reached at
// load gives no tools after bounded retries (HTTP-02).
//
// A 404 on a request that carried a session id drops the session, initializes a new one and
// retries that call exactly once (HTTP-04); concurrent 404s renew once. The keep-alive pings
// (HTTP-06) and a 404 on a ping renews before the next call. The SDK opens an idle GET stream
// after `notifications/initialized`; the seed opens none (HTTP-07), so the transport's fetch
// answers its own GET with 405 ("no stream offered"), which the SDK accepts quietly.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";

import type { BridgeConfig } from "./config.ts";
import { DispatchSignal } from "../../seed-policy/dispatch.ts";
import { PalaceTimeout, PalaceToolError, PalaceUnavailable, redact, why } from "./errors.ts";
import { callToolLoosely, DeadlinePassed, listAllTools, runPreamble, UNBOUNDED_MS } from "./local.ts";
import type { Log } from "./local.ts";
import { ANSWER_STREAM_CLOSED, guardAnswerStream, refusedResume, requestIds } from "./sse-guard.ts";
import { StrictIds } from "./strict-ids.ts";
import { refuseServerRequests } from "./server-requests.ts";
import { timerMs } from "../../seed-policy/timer.ts";

const CLIENT_INFO = { name: "mempalace-opencode", version: "0.1.0" };

/**
 * An HTTP status from the palace; hosts classify it by `status` (401/403 auth, else http_error).
 * A JSON-RPC error in the body (a proxy's 502) keeps its `code` (TOOL-04).
 */
export class PalaceHttpError extends Error {
  override name = "PalaceHttpError";
  readonly status: number;
  readonly code: number | undefined;
  constructor(status: number, message: string, code?: number) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The palace broke the protocol (wrong content type, 202 to a request, ...). */
export class PalaceProtocolError extends Error {
  override name = "PalaceProtocolError";
}

export class PalaceSessionLost extends Error {
  override name = "PalaceSessionLostError";
}

type Session = { client: Client; transport: StreamableHTTPClientTransport; ids: StrictIds };

/** How long stopping waits for a notification already on its way (a cancel) before the DELETE. */
const NOTICE_DRAIN_MS = 2000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, timerMs(ms)));

/**
 * fetch that never opens the idle server-to-client GET stream (HTTP-07), that fails a request
 * answered 202 at once (the SDK would wait for an answer that never comes), and that hands the
 * SDK a request's answer stream normalised and bounded (src/sse-guard.ts: HTTP-10, HTTP-12).
 */
function palaceFetch(dispatched: DispatchSignal): typeof fetch {
  return async (input, init) => {
    const method = (init?.method ?? "GET").toUpperCase();
    if (method === "GET" && !new Headers(init?.headers).has("last-event-id")) return new Response(null, { status: 405 });
    if (method === "POST") dispatched.fire();
    const response = await fetch(input, init);
    if (method === "GET" && !response.ok) {
      const refused = refusedResume(new Headers(init?.headers).get("last-event-id"));
      if (refused) {
        await response.body?.cancel();
        return refused;
      }
    }
    if (method === "POST" && response.status === 202 && typeof init?.body === "string" && /"id"\s*:/.test(init.body)
      && /"method"\s*:/.test(init.body)) {
      await response.body?.cancel();
      throw new PalaceProtocolError("protocol error: the palace answered a request with 202 Accepted and no answer");
    }
    const type = response.headers.get("content-type") ?? "";
    if (method === "POST" && response.ok && type.toLowerCase().includes("text/event-stream")) {
      const ids = requestIds(init?.body);
      if (ids.size > 0) return guardAnswerStream(response, ids);
    }
    return response;
  };
}

/** The JSON-RPC error code in an HTTP error body, if there is one. */
function bodyCode(message: string): number | undefined {
  const at = message.indexOf("{");
  if (at < 0) return undefined;
  try {
    const code = (JSON.parse(message.slice(at)) as { error?: { code?: unknown } }).error?.code;
    return Number.isInteger(code) ? code as number : undefined;
  } catch {
    return undefined;
  }
}

function is404(error: unknown): boolean {
  return error instanceof StreamableHTTPError && error.code === 404;
}

export class RemotePalace {
  tools: Tool[] = [];
  readonly dispatched = new DispatchSignal();
  private readonly config: BridgeConfig;
  private readonly log: Log;
  private session: Session | undefined;
  /** The session of a start that failed after the palace opened it, DELETEd at stop. */
  private leftover: { sessionId: string; protocolVersion: string | undefined } | undefined;
  private started: boolean | undefined;
  private stale = false;
  private renewing: Promise<Session> | undefined;
  private keepalive: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(config: BridgeConfig, log: Log) {
    this.config = config;
    this.log = log;
  }

  /** Connect with bounded retries (HTTP-02), the backoff doubled per retry. */
  async start(): Promise<boolean> {
    if (this.started !== undefined) return this.started;
    for (let attempt = 0; attempt <= this.config.connectRetries; attempt++) {
      if (attempt > 0) await sleep(this.config.connectBackoffMs * 2 ** (attempt - 1));
      try {
        this.session = await this.open();
        this.started = true;
        this.startKeepalive();
        return true;
      } catch (error) {
        this.log.debug(`connect attempt ${attempt + 1} failed: ${why(error)}`);
      }
    }
    this.started = false;
    this.log.line("mempalace-mcp unavailable after retries; continuing without palace tools");
    return false;
  }

  /** One tool call under `timeoutMs` (the request timeout when undefined; 0: none). */
  async callTool(name: string, args: Record<string, unknown>, timeoutMs = this.config.timeoutMs): Promise<CallToolResult> {
    if (this.started === undefined) await this.start();
    if (this.started === false || this.stopped) throw new PalaceUnavailable("the remote palace did not connect");
    let session = this.session as Session;
    if (this.stale) session = await this.renew(session);
    try {
      return await this.call(session, name, args, timeoutMs);
    } catch (error) {
      if (!is404(error) || !session.transport.sessionId) throw this.mapped(error, name, timeoutMs);
    }
    // HTTP-04: the session is gone; one new session, one retry, no loop
    const fresh = await this.renew(session);
    try {
      return await this.call(fresh, name, args, timeoutMs);
    } catch (error) {
      if (!is404(error)) throw this.mapped(error, name, timeoutMs);
      if (this.session === fresh) this.stale = true; // its id is dead too: the next call renews
      throw new PalaceSessionLost("mempalace session lost: the server answered 404 again after a fresh initialize (tools/call got HTTP 404 twice)");
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.keepalive);
    const session = this.session;
    const leftover = this.leftover;
    this.session = undefined;
    this.leftover = undefined;
    // the SDK closed the failed start's transport, so its DELETE is sent here, as the transport would
    if (!session && leftover) await this.deleteLeftover(leftover).catch(() => undefined);
    if (!session) return;
    // a timed-out call's cancel still on its way is sent first (the reference sends it before it stops)
    await session.ids.noticesSent(NOTICE_DRAIN_MS);
    // LIFE-06: best-effort DELETE of a held session (a 405 is fine), then close
    if (session.transport.sessionId) await session.transport.terminateSession().catch(() => undefined);
    await session.client.close().catch(() => undefined);
  }

  private async deleteLeftover(leftover: { sessionId: string; protocolVersion: string | undefined }): Promise<void> {
    const headers: Record<string, string> = { "mcp-session-id": leftover.sessionId };
    if (leftover.protocolVersion) headers["mcp-protocol-version"] = leftover.protocolVersion;
    if (this.config.remoteToken) headers["Authorization"] = `Bearer ${this.config.remoteToken}`;
    const response = await fetch(new URL(this.config.remoteUrl as string), { method: "DELETE", headers });
    await response.body?.cancel();
  }

  private async call(session: Session, name: string, args: Record<string, unknown>, timeoutMs: number): Promise<CallToolResult> {
    return await callToolLoosely(session.client, name, args, timeoutMs);
  }

  private mapped(error: unknown, name: string, timeoutMs = this.config.timeoutMs): Error {
    const secrets = this.config.remoteToken ? [this.config.remoteToken] : [];
    if (error instanceof DeadlinePassed) {
      return new PalaceTimeout(`mempalace ${name} timed out after ${timeoutMs} ms`);
    }
    if (error instanceof McpError) {
      const data = error.data as { bridge?: unknown } | undefined;
      if (data && typeof data === "object" && data.bridge === ANSWER_STREAM_CLOSED) {
        return new PalaceProtocolError(`protocol error: ${name}: ${error.message.replace(/^MCP error -?\d+: /, "")}`);
      }
      if (error.code === ErrorCode.RequestTimeout && error.message === "MCP error -32001: Request timed out") {
        return new PalaceTimeout(`mempalace ${name} timed out after ${timeoutMs} ms`);
      }
      if (error.code === ErrorCode.ConnectionClosed && error.message === "MCP error -32000: Connection closed") {
        return new Error("connection closed (the palace connection ended)");
      }
      return new PalaceToolError(error.code, redact(error.message.replace(/^MCP error -?\d+: /, ""), secrets),
        redact(error.data, secrets));
    }
    if (error instanceof StreamableHTTPError && typeof error.code === "number") {
      const message = redact(error.message, secrets);
      if (error.code >= 100) return new PalaceHttpError(error.code, `HTTP ${error.code} from the palace: ${message}`, bodyCode(message));
      return new PalaceProtocolError(`protocol error: ${message}`);
    }
    // the SDK's zod check of a message that is not JSON-RPC (a result with a null id): the palace broke the protocol
    if (error instanceof Error && error.name === "ZodError") {
      return new PalaceProtocolError(`protocol error: ${name}: the palace sent a message that is not JSON-RPC`);
    }
    if (error instanceof Error) return error;
    return new Error(redact(String(error), secrets));
  }

  /** A new session in place of `from`; callers that lost the same session share one renewal. */
  private async renew(from: Session): Promise<Session> {
    // someone else renewed already, and that session is not known dead: use it
    if (this.session !== from && this.session !== undefined && !this.stale) return this.session;
    // the old client is dropped, not closed: closing it would fail the other calls still in
    // flight on it, which must get their own 404 and retry on the new session
    this.renewing ??= (async () => {
      try {
        const fresh = await this.open(false);
        this.session = fresh;
        this.stale = false;
        return fresh;
      } catch (error) {
        throw new PalaceSessionLost(`session lost: could not re-establish it (${why(error)})`);
      } finally {
        this.renewing = undefined;
      }
    })();
    return this.renewing;
  }

  /**
   * initialize, initialized, tools/list (every page: only at start, `list`; a renewed session
   * keeps the tools registered, as the reference's does), inside the init budget; `initialize`
   * is never cancelled.
   */
  private async open(list = true): Promise<Session> {
    const headers: Record<string, string> = {};
    if (this.config.remoteToken) headers["Authorization"] = `Bearer ${this.config.remoteToken}`;
    const transport = new StreamableHTTPClientTransport(new URL(this.config.remoteUrl as string), {
      requestInit: { headers }, fetch: palaceFetch(this.dispatched),
      reconnectionOptions: { maxRetries: 2, initialReconnectionDelay: 1000, maxReconnectionDelay: 30000, reconnectionDelayGrowFactor: 1.5 },
    });
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    client.onerror = (error) => this.log.debug(`palace: ${why(error)}`);
    refuseServerRequests(client);
    const ids = new StrictIds(transport);
    const work = (async () => {
      await client.connect(ids, { timeout: UNBOUNDED_MS });
      if (list) this.tools = await listAllTools(client);
    })();
    const budget = this.config.initTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const racers: Promise<void>[] = [work];
    if (budget > 0) {
      racers.push(new Promise((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`handshake stalled past ${budget} ms`)), timerMs(budget));
      }));
    }
    try {
      await Promise.race(racers);
      clearTimeout(timer);
      await runPreamble(client, this.config);
    } catch (error) {
      work.catch(() => undefined);
      if (transport.sessionId && this.session === undefined) {
        // a session the palace opened for a start that failed (its `initialized` refused, say) is
        // still held: the reference DELETEs it at stop (LIFE-06); only the last one is kept
        this.leftover = { sessionId: transport.sessionId, protocolVersion: transport.protocolVersion };
      }
      await client.close().catch(() => undefined);
      throw error;
    } finally {
      clearTimeout(timer);
    }
    return { client, transport, ids };
  }

  private startKeepalive(): void {
    const every = this.config.keepaliveMs;
    if (every <= 0) return;
    let pinging = false;
    this.keepalive = setInterval(() => {
      const session = this.session;
      // one ping at a time: a tick while the last ping waits would send the same (maybe dead) id again
      if (!session || this.stale || this.renewing || pinging) return;
      pinging = true;
      session.client.ping({ timeout: this.config.timeoutMs === 0 ? UNBOUNDED_MS : timerMs(this.config.timeoutMs) }).catch((error: unknown) => {
        // a 404 speaks of a session only when there is one: replaced before the next call (HTTP-06)
        if (is404(error) && session.transport.sessionId && this.session === session) {
          // replaced now, as the reference does, not at the next call (which then finds it ready)
          this.stale = true;
          this.renew(session).catch((renewal: unknown) => this.log.debug(`session renewal failed: ${why(renewal)}`));
        }
        this.log.debug(`keep-alive ping failed: ${why(error)}`);
      }).finally(() => { pinging = false; });
    }, timerMs(every));
    this.keepalive.unref();
  }
}
