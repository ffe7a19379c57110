// twoserver: a pi <-> MemPalace bridge of the "light server beside the full one" family.
//
// Two palace servers, each its own child: the full server (`mempalace-mcp`), whose tools are
// registered with their schemas unchanged, and the light server (`mempalace-light-mcp`, three
// tools taking a small query language), started beside it for one tool of the bridge's own,
// `palace_query`, which forwards to the light server's `palace_query`: cheap lookups in a
// fraction of the full server's context. Both are started at session_start, bounded, killed
// when stalled, respawned within a budget when they die and closed at shutdown. Stdio only,
// seed knobs: MEMPALACE_MCP_TIMEOUT_MS (60000), MEMPALACE_MCP_INIT_TIMEOUT_MS (300000),
// MEMPALACE_MCP_MAX_RESPAWNS (2), MEMPALACE_MCP_RESPAWN_BACKOFF_MS (1000, doubled per attempt),
// MEMPALACE_EXT_DEBUG=1 (forward the servers' stderr). Like a bridge on the official SDK, it
// gives its children only the SDK's default environment (HOME, LOGNAME, PATH, SHELL, TERM, USER).
//
// PLANTED DEFECTS:
// STDIO-13: a stdout line that is not JSON-RPC is taken for a broken server: the child is killed and the calls in flight fail
// TOOL-06: answers are matched to requests by loose id equality, so an answer with id "7" is taken for request 7

import { spawn, type ChildProcess } from "node:child_process";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  ConnectionClosedError, handshake, isAnswer, lineSplitter, parseMessage, sleep, unwrap,
  type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

/** What the official SDK's StdioClientTransport passes a child by default: nothing else. */
const CHILD_ENV_NAMES = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of CHILD_ENV_NAMES) {
    const value = process.env[name];
    if (value !== undefined && !value.startsWith("()")) env[name] = value;
  }
  return env;
}

const STOP_WAIT_MS = 2_000;
const KILL_GRACE_MS = 2_000;

interface Settings {
  timeoutMs: number;
  initTimeoutMs: number;
  maxRespawns: number;
  backoffMs: number;
  debug: boolean;
}

function setting(name: string, fallback: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (Number.isInteger(value) && value >= 0) return value;
  console.error(`twoserver: ignoring ${name}=${JSON.stringify(raw)} (not a non-negative integer); using ${fallback}`);
  return fallback;
}

function readSettings(): Settings {
  return {
    timeoutMs: setting("MEMPALACE_MCP_TIMEOUT_MS", 60_000),
    initTimeoutMs: setting("MEMPALACE_MCP_INIT_TIMEOUT_MS", 300_000),
    maxRespawns: setting("MEMPALACE_MCP_MAX_RESPAWNS", 2),
    backoffMs: setting("MEMPALACE_MCP_RESPAWN_BACKOFF_MS", 1_000),
    debug: process.env.MEMPALACE_EXT_DEBUG === "1",
  };
}

class TimeoutError extends Error {
  constructor(method: string, ms: number) {
    super(`mempalace ${method} timed out after ${ms} ms`);
    this.name = "TimeoutError";
  }
}

interface Pending { resolve: (answer: RpcMessage) => void; reject: (error: Error) => void; timer?: NodeJS.Timeout }

/** One `mempalace-mcp` process and the requests waiting on it. */
class Child {
  readonly proc: ChildProcess;
  readonly pending = new Map<number, Pending>();
  readonly exited: Promise<void>;
  gone = false;
  spawnError?: NodeJS.ErrnoException;

  constructor(readonly program: string, debug: boolean) {
    this.proc = spawn(program, [], {
      stdio: ["pipe", "pipe", "pipe"], detached: true, env: childEnv(),
    });
    this.exited = new Promise((resolve) => {
      this.proc.once("exit", (code, signal) => {
        this.fail(`${program} exited (${signal ?? `code ${code}`})`);
        this.signal("SIGKILL"); // what it started goes with it
        resolve();
      });
      this.proc.once("error", (error: NodeJS.ErrnoException) => {
        this.spawnError = error;
        this.fail(`${program} could not be started (${error.code ?? error.message})`);
        resolve();
      });
    });
    this.proc.stdin!.on("error", () => undefined);
    this.proc.stdout!.setEncoding("utf8");
    this.proc.stdout!.on("data", lineSplitter((line) => this.onLine(line)));
    this.proc.stderr!.on("data", (chunk: Buffer) => { if (debug) process.stderr.write(chunk); });
  }

  signal(signal: NodeJS.Signals): void {
    if (this.proc.pid === undefined) return;
    try {
      process.kill(-this.proc.pid, signal);
    } catch { /* the group is gone */ }
  }

  send(id: number, method: string, params: Record<string, unknown> | undefined, timeoutMs: number): Promise<RpcMessage> {
    if (this.gone) return Promise.reject(new ConnectionClosedError(`${this.program} is not running`));
    return new Promise((resolve, reject) => {
      const entry: Pending = { resolve, reject };
      if (timeoutMs > 0) {
        entry.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new TimeoutError(method, timeoutMs));
        }, timeoutMs);
      }
      this.pending.set(id, entry);
      this.write({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
    });
  }

  notify(method: string, params?: Record<string, unknown>): void {
    this.write({ jsonrpc: "2.0", method, ...(params ? { params } : {}) });
  }

  private write(message: RpcMessage): void {
    if (!this.gone) this.proc.stdin!.write(`${JSON.stringify(message)}\n`);
  }

  private onLine(line: string): void {
    const message = parseMessage(line);
    if (!message) {
      console.error(`twoserver: ${this.program} wrote a line that is not JSON-RPC; restarting it`);
      this.signal("SIGKILL");
    } else if (isAnswer(message)) {
      const id = Number(message.id);
      const entry = this.pending.get(id);
      if (!entry) return; // an answer to a request we gave up on, or to no request
      this.pending.delete(id);
      clearTimeout(entry.timer);
      entry.resolve(message);
    } else if (message.method && message.id !== undefined && message.id !== null) {
      const reply = message.method === "ping" ? { result: {} } : { error: { code: -32601, message: "Method not found" } };
      this.write({ jsonrpc: "2.0", id: message.id, ...reply });
    }
  }

  private fail(reason: string): void {
    this.gone = true;
    for (const entry of this.pending.values()) {
      clearTimeout(entry.timer);
      entry.reject(new ConnectionClosedError(reason));
    }
    this.pending.clear();
  }
}

const exitWithin = (child: Child, ms: number) =>
  Promise.race([child.exited.then(() => true), sleep(ms).then(() => child.gone)]);

/** SIGTERM, then SIGKILL if it is still there after the grace. */
async function kill(child: Child): Promise<void> {
  child.signal("SIGTERM");
  if (await exitWithin(child, KILL_GRACE_MS)) return;
  child.signal("SIGKILL");
  await exitWithin(child, STOP_WAIT_MS);
}

/** Close stdin and let the server exit; SIGTERM, then SIGKILL, only if it does not. */
async function stop(child: Child): Promise<void> {
  child.proc.stdin!.end();
  if (await exitWithin(child, STOP_WAIT_MS)) return;
  await kill(child);
}

/** The supervised child: started on demand, respawned within a budget, latched once spent. */
class Palace {
  tools: McpTool[] = [];
  private child?: Child;
  private starting?: Promise<Child>;
  private state: "new" | "ready" | "dead" | "latched" | "stopped" = "new";
  private respawns = 0;
  private why = "";
  private nextId = 1;

  constructor(private readonly program: string, private readonly settings: Settings) {}

  async call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    return await this.callOnce(name, args);
  }

  async ready(): Promise<Child> {
    const child = this.child;
    if (child && this.state === "ready" && !child.gone) return child;
    if (this.state === "ready") this.died(child, `${this.program} is gone`);
    this.starting ??= this.start().finally(() => { this.starting = undefined; });
    return this.starting;
  }

  async stop(): Promise<void> {
    this.state = "stopped";
    const child = this.child;
    this.child = undefined;
    if (child) await stop(child);
  }

  private async callOnce(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    const child = await this.ready();
    const answer = await this.request(child, "tools/call", { name, arguments: args }, this.settings.timeoutMs);
    return unwrap(answer) as ToolResult;
  }

  private async request(child: Child, method: string, params: Record<string, unknown> | undefined,
    timeoutMs: number): Promise<RpcMessage> {
    const id = this.nextId++;
    try {
      const answer = await child.send(id, method, params, timeoutMs);
      if (child === this.child) this.respawns = 0; // any answer proves the server is alive
      return answer;
    } catch (error) {
      if (error instanceof TimeoutError) {
        child.notify("notifications/cancelled", { requestId: id, reason: "timed out" });
        this.died(child, error.message);
        void kill(child);
      } else if (error instanceof ConnectionClosedError) {
        this.died(child, error.message);
      }
      throw error;
    }
  }

  private died(child: Child | undefined, why: string): void {
    if (child && child === this.child) {
      this.child = undefined;
      this.state = "dead";
      this.why = why;
    }
  }

  private async start(): Promise<Child> {
    for (;;) {
      if (this.state === "stopped") throw new Error("palace unavailable: the session has ended");
      if (this.state === "latched") throw new Error(`palace unavailable: ${this.why}`);
      if (this.state === "dead") {
        if (this.respawns >= this.settings.maxRespawns) {
          this.state = "latched";
          this.why = `gave up after ${this.settings.maxRespawns} respawn(s); last failure: ${this.why}`;
          continue;
        }
        this.respawns += 1;
        await sleep(this.settings.backoffMs * 2 ** (this.respawns - 1));
        if (this.state === "stopped") continue;
      }
      const child = new Child(this.program, this.settings.debug);
      try {
        this.tools = await this.handshake(child);
      } catch (error) {
        this.why = (error as Error).message;
        this.state = child.spawnError ? "latched" : "dead";
        if (!child.gone) await kill(child);
        continue;
      }
      if (this.state === "stopped") {
        await stop(child);
        continue;
      }
      this.child = child;
      this.state = "ready";
      this.respawns = 0;
      return child;
    }
  }

  /** initialize, initialized and every tools/list page, within the start-up budget. */
  private handshake(child: Child): Promise<McpTool[]> {
    const budget = this.settings.initTimeoutMs;
    const deadline = Date.now() + budget;
    const left = () => (budget === 0 ? 0 : Math.max(1, deadline - Date.now()));
    return handshake(
      async (method, params) => unwrap(await child.send(this.nextId++, method, params, left())),
      async (method) => child.notify(method), "twoserver-bridge");
  }
}

export default function twoserver(pi: ExtensionAPI) {
  const settings = readSettings();
  const full = new Palace("mempalace-mcp", settings);
  const light = new Palace("mempalace-light-mcp", settings);
  let registered = false;

  pi.on("session_start", async () => {
    if (registered) return;
    const [fullUp, lightUp] = await Promise.allSettled([full.ready(), light.ready()]);
    if (fullUp.status === "rejected") {
      // one line for the session, whichever servers failed: the light one is no use alone
      console.error(`twoserver: mempalace-mcp unavailable (${(fullUp.reason as Error).message}); continuing without palace tools`);
      return;
    } else {
      registered = true;
      for (const tool of full.tools) {
        pi.registerTool({
          name: tool.name,
          label: tool.name,
          description: tool.description ?? "",
          parameters: Type.Unsafe(tool.inputSchema),
          async execute(_id, params) {
            const result = await full.call(tool.name, params as Record<string, unknown>);
            return { content: (result.content ?? []) as never, details: undefined, isError: Boolean(result.isError) };
          },
        });
      }
    }
    const query = lightUp.status === "fulfilled" ? light.tools.find((tool) => tool.name === "palace_query") : undefined;
    if (!query) {
      if (lightUp.status === "rejected") console.error(`twoserver: mempalace-light-mcp unavailable (${(lightUp.reason as Error).message}); no palace_query`);
      return;
    }
    pi.registerTool({
      name: "palace_query",
      label: "palace_query",
      description: query.description ?? "Quick palace lookups in the light server's query language.",
      parameters: Type.Unsafe(query.inputSchema),
      async execute(_id, params) {
        const result = await light.call("palace_query", params as Record<string, unknown>);
        return { content: (result.content ?? []) as never, details: undefined, isError: Boolean(result.isError) };
      },
    });
  });

  pi.on("session_shutdown", async () => {
    await Promise.all([full.stop(), light.stop()]);
  });
}
