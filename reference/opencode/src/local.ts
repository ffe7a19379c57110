// The local palace: a supervised `mempalace-mcp` child on the official SDK's `Client`, over a
// stdio transport whose child leads a process group of its own (src/stdio-transport.ts: the SDK's
// `StdioClientTransport` cannot, and LIFE-06 sweeps the group), STDIO-01..13.
//
// Glue between RespawnPolicy (what to do) and one SDK connection per child (doing it). A stalled
// request fails with a timeout and its child is killed (SIGTERM, then SIGKILL after the grace),
// never retried; the next call respawns after the backoff, redoes the handshake and runs. A crash
// fails the in-flight calls at once (the SDK rejects them when the transport closes).
//
// The child gets the whole environment captured at load, as OpenCode itself gives its local MCP
// servers (the SDK's default is a short whitelist), so PALACE_* and the seed's knobs reach it.

import { accessSync, constants } from "node:fs";
import { join } from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { tool } from "@opencode-ai/plugin";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";

import type { BridgeConfig, Env } from "./config.ts";
import { PalaceConnectionClosed, PalaceTimeout, PalaceToolError, PalaceUnavailable, redact, why } from "./errors.ts";
import { RespawnPolicy } from "../../seed-policy/respawn.ts";
import { DispatchSignal } from "../../seed-policy/dispatch.ts";
import { DRAIN_MS, GroupStdioTransport } from "./stdio-transport.ts";
import { StrictIds } from "./strict-ids.ts";
import { refuseServerRequests } from "./server-requests.ts";
import { TIMER_MAX_MS, timerMs } from "../../seed-policy/timer.ts";

const CLIENT_INFO = { name: "mempalace-opencode", version: "0.1.0" };
// "no timeout" for the SDK, whose request timeout cannot be switched off (the seed's 0): Node's
// longest timer, about 24.8 days
export const UNBOUNDED_MS = TIMER_MAX_MS;
// after SIGKILL: how long to wait for the exit before giving up on it
const AFTER_KILL_MS = 1000;

export type Log = { line(text: string): void; debug(text: string): void };

/** One spawned child: its SDK client and how to know it ended. */
class Child {
  readonly exited: Promise<void>;
  alive = true;
  closedReason = "";
  private markExited!: () => void;

  readonly client: Client;
  readonly transport: GroupStdioTransport;

  constructor(client: Client, transport: GroupStdioTransport) {
    this.client = client;
    this.transport = transport;
    this.exited = new Promise((resolve) => { this.markExited = resolve; });
    client.onclose = () => {
      this.alive = false;
      this.closedReason ||= "mempalace-mcp exited";
      this.markExited();
    };
  }

  /** SIGTERM to the child's group, then SIGKILL if it is still there after `graceMs` (STDIO-02); the group is swept. */
  async terminate(graceMs: number): Promise<void> {
    const transport = this.transport;
    if (!transport.exited) {
      if (graceMs > 0) transport.signalGroup("SIGTERM");
      if (graceMs <= 0 || !(await transport.waitExit(graceMs))) {
        transport.signalGroup("SIGKILL");
        await transport.waitExit(AFTER_KILL_MS);
      }
    }
    await within(this.exited, AFTER_KILL_MS * 2);
    await this.client.close().catch(() => undefined);
  }
}

/** Where PATH finds `command` (what exec was asked to run, named in a start's error: STDIO-10); itself when not found. */
function onPath(command: string, path: string | undefined): string {
  if (command.includes("/")) return command;
  for (const dir of (path ?? "").split(":")) {
    if (!dir) continue;
    const candidate = join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return command;
}

/** Whether `promise` settled within `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), timerMs(ms)); });
  try {
    return await Promise.race([promise.then(() => true as const, () => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `tools/list`, every page (LIFE-04). A nameless entry is skipped, not a broken handshake: the
 * SDK's `listTools` would reject the whole list, so the pages are read with a permissive schema.
 */
export async function listAllTools(client: Client): Promise<Tool[]> {
  const z = tool.schema;
  const page = z.object({ tools: z.array(z.unknown()), nextCursor: z.string().optional() }) as unknown as ResultSchema<
    { tools: unknown[]; nextCursor?: string }>;
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    // the first page asks with no params at all, as the seed copy does ({} is another message)
    const answer = await client.request(cursor === undefined ? { method: "tools/list" } : { method: "tools/list", params: { cursor } }, page,
      { timeout: UNBOUNDED_MS });
    for (const entry of answer.tools) {
      const spec = entry as Partial<Tool> | null;
      if (!spec || typeof spec !== "object" || typeof spec.name !== "string" || spec.name === "") continue;
      const schema = spec.inputSchema && typeof spec.inputSchema === "object" ? spec.inputSchema : { type: "object" as const };
      tools.push({ ...spec, name: spec.name, inputSchema: schema } as Tool);
    }
    cursor = answer.nextCursor;
  } while (cursor);
  return tools;
}

/** A zod schema from the plugin package's zod, typed for the SDK's `request` (another zod copy). */
type ResultSchema<T> = Parameters<Client["request"]>[1] & { _output: T };

/**
 * The bridge's own request deadline: the SDK's timeout error has the same code (-32001) as a
 * palace's peer-writer error (TOOL-04), so the deadline aborts the request with this instead.
 */
export class DeadlinePassed extends McpError {
  constructor(timeoutMs: number) {
    super(ErrorCode.RequestTimeout, `the bridge's deadline of ${timeoutMs} ms passed`);
  }

  /** The SDK's cancel notice gives `String(reason)` as its reason: the seed copy's words. */
  override toString(): string {
    return CANCEL_REASON;
  }
}

/** The reason of the `notifications/cancelled` a timed-out request gets (the seed copy's). */
export const CANCEL_REASON = "Request timed out";

/**
 * `tools/call` with the answer read as the seed reads it (TOOL-03): `isError` only when it is
 * `true`, every field kept. The SDK's `callTool` rejects a result whose `isError` is not a boolean.
 * `timeoutMs` 0 waits without a deadline (the seed's 0); a deadline rejects with DeadlinePassed.
 */
export async function callToolLoosely(client: Client, name: string, args: Record<string, unknown>,
  timeoutMs: number): Promise<CallToolResult> {
  const z = tool.schema;
  const loose = z.looseObject({ content: z.unknown().optional(), isError: z.unknown().optional() }) as unknown as
    ResultSchema<{ content?: unknown; isError?: unknown } & Record<string, unknown>>;
  const deadline = new AbortController();
  const timer = timeoutMs > 0 ? setTimeout(() => deadline.abort(new DeadlinePassed(timeoutMs)), timerMs(timeoutMs)) : undefined;
  let answer: { content?: unknown; isError?: unknown } & Record<string, unknown>;
  try {
    answer = await client.request({ method: "tools/call", params: { name, arguments: args } }, loose,
      { timeout: UNBOUNDED_MS, signal: deadline.signal });
  } finally {
    clearTimeout(timer);
  }
  const blocks: unknown = answer.content ?? [];
  if (!Array.isArray(blocks) || !blocks.every((block) => Boolean(block) && typeof block === "object" && !Array.isArray(block))) {
    throw new Error(`protocol error: the palace's ${name} result has no valid content list`);
  }
  const content = blocks as CallToolResult["content"];
  return { ...answer, content, isError: answer.isError === true };
}

/**
 * The session preamble (MEMPALACE_SESSION_PREAMBLE), first call on every new child or session,
 * under the request timeout: a JSON-RPC error from it fails the start (STDIO-05, HTTP-05).
 */
export async function runPreamble(client: Client, config: BridgeConfig): Promise<void> {
  const preamble = config.preamble;
  if (!preamble) return;
  try {
    await callToolLoosely(client, preamble.tool, preamble.arguments, config.timeoutMs);
  } catch (error) {
    if (error instanceof DeadlinePassed) throw new PalaceTimeout(`session preamble ${preamble.tool} timed out after ${config.timeoutMs} ms`);
    if (error instanceof McpError) throw new PalaceUnavailable(`session preamble ${preamble.tool} failed: ${error.message}`);
    throw error;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, timerMs(ms)));

export class LocalPalace {
  readonly policy: RespawnPolicy;
  readonly dispatched = new DispatchSignal();
  tools: Tool[] = [];
  private child: Child | undefined;
  private started: boolean | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private dying = new Set<Promise<void>>();

  private readonly config: BridgeConfig;
  private readonly env: Env;
  private readonly log: Log;

  constructor(config: BridgeConfig, env: Env, log: Log) {
    this.config = config;
    this.env = env;
    this.log = log;
    this.policy = new RespawnPolicy(config.maxRespawns, config.respawnBackoffMs);
  }

  /** First start, tolerant: the same bounded respawn runs before giving up (STDIO-09). */
  async start(): Promise<boolean> {
    if (this.started !== undefined) return this.started;
    try {
      await this.serialised(() => this.ensureChild());
      this.started = true;
    } catch (error) {
      this.started = false;
      this.log.line(`mempalace-mcp unavailable (${why(error)}); continuing without palace tools`);
    }
    return this.started;
  }

  /** One tool call under `timeoutMs` (the request timeout when undefined; 0: none). */
  async callTool(name: string, args: Record<string, unknown>, timeoutMs = this.config.timeoutMs): Promise<CallToolResult> {
    if (this.started === undefined) await this.start();
    if (this.started === false) throw new PalaceUnavailable(`did not start (${this.policy.latchReason || this.policy.lastFailure || "see stderr"})`);
    const child = await this.serialised(() => this.ensureChild());
    try {
      const result = await callToolLoosely(child.client, name, args, timeoutMs);
      this.policy.onSuccess();
      return result;
    } catch (error) {
      if (error instanceof DeadlinePassed) {
        this.retire(child, `${name} stalled past ${timeoutMs} ms`);
        throw new PalaceTimeout(`mempalace ${name} timed out after ${timeoutMs} ms`);
      }
      if (!child.alive || (error instanceof McpError && error.code === ErrorCode.ConnectionClosed
        && error.message === "MCP error -32000: Connection closed")) {
        const reason = child.closedReason || "mempalace-mcp exited";
        this.retire(child, reason);
        throw new PalaceConnectionClosed(reason);
      }
      if (error instanceof McpError) {
        this.policy.onSuccess(); // the palace answered: proof of life
        throw new PalaceToolError(error.code, error.message.replace(/^MCP error -?\d+: /, ""), error.data);
      }
      throw error;
    }
  }

  /**
   * LIFE-06: stdin closed, then SIGTERM to the child's group after the kill grace, SIGKILL after
   * another (at a zero grace, SIGKILL alone); once the child is gone its group is swept and its pipes read for a moment (DRAIN_MS).
   */
  async stop(): Promise<void> {
    this.policy.onStop();
    const child = this.child;
    this.child = undefined;
    if (child) {
      const transport = child.transport;
      const grace = this.config.killGraceMs;
      transport.endInput();
      if (!(await transport.waitExit(grace))) {
        // a zero grace is no time to act on SIGTERM: SIGKILL at once, as the other copies
        // (whether the child noted a SIGTERM must not depend on how fast it ran)
        if (grace > 0) transport.signalGroup("SIGTERM");
        if (grace <= 0 || !(await transport.waitExit(grace))) transport.signalGroup("SIGKILL");
      }
      await within(child.exited, grace + DRAIN_MS + 100);
      await child.client.close().catch(() => undefined);
    }
    await Promise.allSettled([...this.dying]);
  }

  /** Starts one at a time: a second caller waits for the first start to finish. */
  private serialised<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async ensureChild(): Promise<Child> {
    const current = this.child;
    if (current && !current.alive) this.retire(current, current.closedReason || "mempalace-mcp exited");
    for (;;) {
      const decision = this.policy.wantChild();
      if (decision.kind === "use-current") return this.child as Child;
      if (decision.kind === "refuse") throw new PalaceUnavailable(decision.why);
      await Promise.allSettled([...this.dying]); // the old child must let go of the palace lock first
      if (decision.delayMs > 0) {
        this.log.debug(`respawn attempt ${decision.attempt} in ${decision.delayMs} ms`);
        await sleep(decision.delayMs);
      }
      const child = this.spawn();
      try {
        await this.handshake(child);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException | undefined)?.code;
        if (code === "ENOENT" || code === "EACCES") {
          const detail = `cannot start ${onPath(this.config.serverCommand, this.env.PATH)}: ${code}`;
          this.policy.onUnspawnable(detail);
          throw new PalaceUnavailable(detail);
        }
        this.policy.onStartFailed(why(error));
        this.log.debug(`start attempt ${decision.attempt} failed: ${why(error)}`);
        await child.terminate(this.config.killGraceMs);
        continue;
      }
      this.child = child;
      this.policy.onReady();
      return child;
    }
  }

  private spawn(): Child {
    const env = Object.fromEntries(Object.entries(this.env).filter((entry): entry is [string, string] => entry[1] !== undefined));
    const transport = new GroupStdioTransport(this.config.serverCommand, env);
    transport.onsend = () => this.dispatched.fire();
    this.drainStderr(transport);
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    const child = new Child(client, transport);
    client.onerror = (error) => this.log.debug(`mempalace-mcp: ${why(error)}`); // a bad stdout line: dropped (STDIO-13)
    refuseServerRequests(client);
    return child;
  }

  /** initialize, initialized, tools/list (every page), all inside the init budget (STDIO-03). */
  private async handshake(child: Child): Promise<void> {
    const budget = this.config.initTimeoutMs;
    const work = (async () => {
      await child.client.connect(new StrictIds(child.transport), { timeout: UNBOUNDED_MS });
      this.tools = await listAllTools(child.client);
    })();
    const closed = child.exited.then(() => { throw new Error(child.closedReason || "mempalace-mcp exited during the handshake"); });
    const racers: Promise<void>[] = [work, closed];
    let timer: NodeJS.Timeout | undefined;
    if (budget > 0) {
      racers.push(new Promise((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`handshake stalled past ${budget} ms`)), timerMs(budget));
      }));
    }
    try {
      await Promise.race(racers);
    } finally {
      clearTimeout(timer);
      work.catch(() => undefined);
      closed.catch(() => undefined);
    }
    await runPreamble(child.client, this.config);
  }

  private retire(child: Child, reason: string): void {
    if (child === this.child) {
      this.policy.onDeath(reason);
      this.child = undefined;
    }
    const dying = child.terminate(this.config.killGraceMs).finally(() => this.dying.delete(dying));
    this.dying.add(dying);
  }

  /** The child's stderr is always read (a flood never blocks it); forwarded only in debug (STDIO-11). */
  private drainStderr(transport: GroupStdioTransport): void {
    let held = "";
    const secrets = this.config.remoteToken ? [this.config.remoteToken] : [];
    // whole lines only, so a token split across reads is whole when it is redacted
    const forward = (line: string) => this.log.line(redact(`mempalace-mcp: ${line}`, secrets));
    transport.onstderr = (chunk) => {
      if (chunk === null) {
        if (this.config.debug && held.trim()) forward(held);
        held = "";
        return;
      }
      if (!this.config.debug) return;
      held += chunk.toString("utf8");
      const lines = held.split("\n");
      held = lines.pop() ?? "";
      for (const line of lines) if (line.trim()) forward(line);
    };
  }
}
