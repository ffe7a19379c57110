/**
 * The remote palace: one MCP session over Streamable HTTP, built on pi's own client library
 * (`@earendil-works/pi-mcp`: McpClient + StreamableHttpTransport), as ADR-044 decides.
 *
 * pi-mcp's client is single-use and never heals, so the session rules live here: a session is one
 * McpClient; a 404 on it (McpSessionExpiredError) replaces it with a new client and the call is
 * retried once (SessionGenerations); the preamble is the first call on every new session (HTTP-05);
 * a keep-alive ping holds it (HTTP-06); no idle GET stream (`openGetStream: false`, HTTP-07). A
 * failed connect is retried a bounded number of times, then the bridge runs without palace tools
 * (fail-closed, never a local child: this module cannot spawn one).
 */
import diagnostics from "node:diagnostics_channel";
import {
  McpAuthRequiredError,
  McpClient,
  McpConnectionClosedError,
  McpError,
  McpHttpError,
  McpSessionExpiredError,
  McpTimeoutError,
  StreamableHttpTransport,
} from "@earendil-works/pi-mcp";
import { type Clock, SYSTEM_CLOCK, timerMs } from "./clock.ts";
import { type BridgeConfig, isRecord } from "./config.ts";
import { ConnectRetries, UNAVAILABLE_LINE } from "./connect.ts";
import { TimeoutPolicy } from "./deadline.ts";
import { DispatchSignal } from "../../seed-policy/dispatch.ts";
import type { Engine } from "./engine.ts";
import {
  describe,
  PalaceAuthError,
  PalaceConnectionClosed,
  PalaceError,
  PalaceHttpError,
  PalaceProtocolError,
  PalaceSessionLost,
  PalaceTimeout,
  PalaceToolError,
  PalaceUnavailable,
} from "./errors.ts";
import type { Deadline } from "./deadline.ts";
import { CLIENT_INFO, listTools, type RpcReply } from "./handshake.ts";
import { Mutex } from "./lock.ts";
import type { Log } from "./log.ts";
import { SessionGenerations } from "./session.ts";
import { type ToolResult, type ToolSpec, toolResultFromWire } from "./tools.ts";
import { WireFetch } from "./wire-fetch.ts";

/** Node's fetch (undici) publishes here once a request's body has been written to the socket. */
const BODY_SENT_CHANNEL = "undici:request:bodySent";

/** How pi-mcp reports a response stream that ended without the response (a synthesized -32603). */
const STREAM_FAILED_CODE = -32603;
const STREAM_FAILED_PREFIX = "MCP response stream failed:";
const INVALID_ANSWER = /^Invalid (MCP|JSON-RPC) /;

/** pi-mcp's reason with an HTTP status worded as what the server answered: the broken exchange is
 * the error (a protocol error, as the Python copy reports it), not an HTTP error of the call. */
function statusFree(reason: string): string {
  return reason.trim().replace(/\bHTTP\s*(\d{3})\b/gi, "answered $1").replace(/\bstatus(?: code)?\s*(\d{3})\b/gi, "answered $1");
}

interface Session {
  client: McpClient;
  generation: number;
  wire: WireFetch;
}

/** What is wrong with the configured URL, without echoing it (it may hold credentials). */
export function urlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "is not a valid URL";
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return "must start with http:// or https://";
  if (!parsed.hostname) return "has no host";
  return undefined;
}

/** A pi-mcp (or fetch) failure as the palace error the Python copy raises for the same wire event. */
export function translate(error: unknown, method: string, timeoutMs: number): PalaceError {
  if (error instanceof PalaceError) return error;
  if (error instanceof McpTimeoutError) return new PalaceTimeout(method, timeoutMs);
  if (error instanceof McpAuthRequiredError) return new PalaceAuthError(error.status, excerpt(error.body));
  if (error instanceof McpSessionExpiredError) return new PalaceSessionLost(`${method} got HTTP 404`);
  if (error instanceof McpHttpError) {
    if (error.status >= 200 && error.status < 300) return new PalaceProtocolError(error.message);
    if (error.status === 401) return new PalaceAuthError(401, excerpt(error.body));
    return new PalaceHttpError(error.status, rpcErrorIn(error.body), excerpt(error.body));
  }
  if (error instanceof McpError) {
    // pi-mcp's verdict on a malformed answer (an invalid JSON-RPC message, a bad MCP result)
    if (INVALID_ANSWER.test(error.message)) return new PalaceProtocolError(error.message);
    // pi-mcp's own stand-in answer for an SSE stream that ended (and could not be resumed) before
    // the response: a broken exchange, not the palace's JSON-RPC error
    if (error.code === STREAM_FAILED_CODE && error.message.startsWith(STREAM_FAILED_PREFIX)) {
      return new PalaceProtocolError(`SSE answer to ${method} ended without the response: ${statusFree(error.message.slice(STREAM_FAILED_PREFIX.length))}`);
    }
    return new PalaceToolError(error.code, error.message, error.data, method);
  }
  if (error instanceof McpConnectionClosedError) return new PalaceConnectionClosed(`${method}: ${error.message}`);
  if (error instanceof SyntaxError) return new PalaceProtocolError(`answer to ${method} is not valid JSON`);
  if (error instanceof TypeError) {
    const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
    const reason = cause ? String(cause.code ?? cause.message) : error.message;
    return new PalaceConnectionClosed(`${method} failed (${reason})`);
  }
  return new PalaceProtocolError(`${method}: ${describe(error)}`);
}

function excerpt(body: string | undefined): string {
  return (body ?? "").split(/\s+/).filter(Boolean).join(" ").slice(0, 200);
}

function rpcErrorIn(body: string | undefined): { code?: unknown; message?: unknown } | undefined {
  try {
    const data: unknown = JSON.parse(body ?? "");
    return isRecord(data) && isRecord(data.error) ? data.error : undefined;
  } catch {
    return undefined;
  }
}

/** One request on `client` within `deadline`; a JSON-RPC error comes back as the reply's error. */
async function rpcReply(client: McpClient, method: string, params: Record<string, unknown> | undefined, deadline: Deadline): Promise<RpcReply> {
  const left = deadline.remainingMs();
  try {
    return { result: await client.request(method, params, { timeoutMs: left === undefined ? 0 : timerMs(Math.max(1, left)) }) };
  } catch (error) {
    if (error instanceof McpError && !INVALID_ANSWER.test(error.message) && !error.message.startsWith(STREAM_FAILED_PREFIX)) {
      return { error: { code: error.code, message: error.message, data: error.data } };
    }
    throw error;
  }
}

export class RemoteEngine implements Engine {
  readonly remote = true;
  tools: ToolSpec[] = [];
  startError?: PalaceError;
  readonly dispatched = new DispatchSignal();
  private readonly config: BridgeConfig;
  private readonly url: string;
  private readonly log: Log;
  private readonly clock: Clock;
  private readonly timeouts: TimeoutPolicy;
  private readonly generations = new SessionGenerations();
  private session?: Session;
  /** The wire of the last opening that failed holding a session id: DELETEd at shutdown. */
  private abandoned?: WireFetch;
  private readonly renewLock = new Mutex();
  private readonly startLock = new Mutex();
  private started?: boolean;
  private stopped = false;
  private keepalive?: NodeJS.Timeout;
  private readonly onBodySent: (message: unknown) => void;

  constructor(config: BridgeConfig, log: Log, clock: Clock = SYSTEM_CLOCK) {
    if (!config.remoteUrl) throw new Error("RemoteEngine needs MEMPALACE_REMOTE_URL");
    this.config = config;
    this.url = config.remoteUrl;
    this.log = log;
    this.clock = clock;
    this.timeouts = new TimeoutPolicy(config.timeoutMs, config.initTimeoutMs);
    let target: URL | undefined;
    try {
      target = new URL(this.url);
    } catch {
      target = undefined; // start() reports the URL; nothing will be sent
    }
    // "a request to the palace is on the wire": fetch offers no hook, Node's diagnostics channel does
    this.onBodySent = (message) => {
      const request = (message as { request?: { origin?: unknown; path?: unknown } }).request;
      if (target && request?.origin === target.origin && typeof request.path === "string"
        && request.path.startsWith(target.pathname)) {
        this.dispatched.fire();
      }
    };
    diagnostics.subscribe(BODY_SENT_CHANNEL, this.onBodySent);
  }

  /** Connect with bounded retries; after the last one, the seed's line and `false`. */
  start(): Promise<boolean> {
    return this.startLock.run(async () => {
      if (this.started !== undefined) return this.started;
      const problem = urlProblem(this.url);
      if (problem) {
        this.log.line(`mempalace: MEMPALACE_REMOTE_URL ${problem}; set the full URL including /mcp, e.g. https://palace.example/mcp`);
        this.log.line(UNAVAILABLE_LINE);
        this.startError = new PalaceUnavailable(`MEMPALACE_REMOTE_URL ${problem}`);
        this.started = false;
        return false;
      }
      const retries = new ConnectRetries(this.config.connectRetries, this.config.connectBackoffMs);
      for (;;) {
        try {
          await this.openSession(true);
          break;
        } catch (error) {
          const failure = translate(error, "initialize", this.config.initTimeoutMs);
          const delay = retries.onFailure(describe(failure));
          this.log.debug(`connect attempt ${retries.failures} failed: ${describe(failure)}`);
          if (delay === undefined || this.stopped) {
            this.startError = failure;
            this.log.line(UNAVAILABLE_LINE);
            this.started = false;
            return false;
          }
          await this.clock.sleep(delay);
        }
      }
      this.started = true;
      if (this.config.keepaliveMs > 0) this.scheduleKeepalive();
      return true;
    });
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    diagnostics.unsubscribe(BODY_SENT_CHANNEL, this.onBodySent);
    if (this.keepalive) clearTimeout(this.keepalive);
    const session = this.session;
    this.session = undefined;
    // a cancel already sent is let through first; then pi-mcp's close sends the best-effort
    // DELETE of a held session (LIFE-06)
    if (session) await session.wire.settle();
    if (!session && this.abandoned) await this.abandoned.release();
    if (session) await session.client.close().catch((error: unknown) => this.log.debug(`close: ${describe(error)}`));
  }

  /** One call on the session: renewed first if it was lost, retried once after a 404. */
  async callTool(name: string, args: Record<string, unknown>, timeoutMs?: number): Promise<ToolResult> {
    if (this.started === undefined) await this.start();
    if (!this.started) throw new PalaceUnavailable("the remote palace was unreachable at start (fail-closed: no local fallback)");
    if (this.stopped) throw new PalaceUnavailable("the palace client was stopped");
    const budget = timeoutMs ?? this.config.timeoutMs;
    for (let attempt = 0; ; attempt += 1) {
      if (this.generations.needsInit || !this.session) await this.renew();
      const session = this.session as Session;
      try {
        const result = await session.client.callTool(name, args, { timeoutMs: timerMs(budget) });
        return toolResultFromWire(result);
      } catch (error) {
        if (!(error instanceof McpSessionExpiredError)) throw translate(error, "tools/call", budget);
        const verdict = this.generations.onNotFound(session.generation, attempt);
        if (verdict === "session-lost") throw new PalaceSessionLost("tools/call got HTTP 404 twice");
        this.log.debug(`tools/call: HTTP 404 on session; new session, retrying once`);
        if (verdict === "renew-and-retry") this.drop(session);
      }
    }
  }

  /** `initialize` (no session id), `initialized`, [`tools/list`], preamble; one budget for the
   * handshake, the request budget for the preamble. */
  private async openSession(listToolsToo: boolean): Promise<void> {
    const deadline = this.timeouts.forHandshake(this.clock);
    const headers: Record<string, string> = {};
    if (this.config.remoteToken) headers.Authorization = `Bearer ${this.config.remoteToken}`;
    const wire = new WireFetch();
    const transport = new StreamableHttpTransport({ url: this.url, headers, openGetStream: false, fetch: wire.fetch });
    const client = new McpClient({ ...CLIENT_INFO, requestTimeoutMs: this.config.initTimeoutMs });
    client.onError((error) => this.log.debug(`pi-mcp: ${describe(error)}`));
    // a failed open leaves the client abandoned, not closed: close() would DELETE a session
    // (pi-mcp's connect closes the transport when it fails: wire.fetch holds that DELETE back)
    try {
      await client.connect(transport);
    } catch (error) {
      if (wire.held) this.abandoned = wire;
      throw error;
    }
    wire.opened = true;
    if (listToolsToo) {
      // our own paging (handshake.ts), not client.listTools: pi-mcp rejects a whole page for one
      // nameless entry, where the seed copy skips the entry and keeps the rest
      this.tools = await listTools((method, params, budget) => rpcReply(client, method, params, budget), deadline, this.log);
    }
    const preamble = this.config.preamble;
    if (preamble) {
      try {
        await client.callTool(preamble.tool, preamble.arguments, { timeoutMs: timerMs(this.config.timeoutMs) });
      } catch (error) {
        if (error instanceof McpError) throw new PalaceUnavailable(`session preamble ${preamble.tool} failed: ${error.message}`);
        throw error;
      }
    }
    this.session = { client, generation: this.generations.onInitialized(), wire };
  }

  /** Replace a lost session, once, however many calls noticed the loss. */
  private renew(): Promise<void> {
    return this.renewLock.run(async () => {
      if (!this.generations.needsInit && this.session) return;
      try {
        await this.openSession(false);
      } catch (error) {
        throw translate(error, "initialize", this.config.initTimeoutMs);
      }
    });
  }

  /** Forget a session the server forgot: no DELETE for it (the server has nothing to delete). */
  private drop(session: Session): void {
    if (this.session === session) this.session = undefined;
  }

  private scheduleKeepalive(): void {
    this.keepalive = setTimeout(() => void this.ping(), timerMs(this.config.keepaliveMs));
    this.keepalive.unref();
  }

  /** Ping every keepaliveMs on the session; a 404 replaces the session now (HTTP-06). */
  private async ping(): Promise<void> {
    if (this.stopped) return;
    try {
      if (this.generations.needsInit || !this.session) {
        await this.renew();
      } else {
        const session = this.session;
        try {
          await session.client.ping({ timeoutMs: timerMs(this.config.timeoutMs) });
        } catch (error) {
          if (!(error instanceof McpSessionExpiredError)) throw error;
          if (this.generations.onPingNotFound(session.generation)) {
            this.log.debug("keep-alive ping: HTTP 404; replacing the session");
            this.drop(session);
            await this.renew();
          }
        }
      }
    } catch (error) {
      this.log.debug(`keep-alive ping failed: ${describe(error)}`);
    } finally {
      if (!this.stopped) this.scheduleKeepalive();
    }
  }
}
