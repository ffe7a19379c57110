// knobs: a pi <-> MemPalace bridge of the "own settings" family.
//
// It does what the seed's stdio path does (spawns `mempalace-mcp` from PATH, registers every palace
// tool with its schema unchanged, bounds every wait, kills a stalled child, respawns a dead one
// with a doubling backoff, closes the child politely at shutdown), but its author named the
// settings after their own project and hard-coded what they never needed to change:
//
//   PALACE_TOOL_TIMEOUT_S      tools/call timeout in SECONDS (default 60; decimals allowed; 0 = none)
//   PALACE_REQUEST_TIMEOUT_MS  any other request once started, e.g. the idle ping (default 10000)
//   PALACE_MAX_RESTARTS        respawn budget (default 2)
//   PALACE_RESTART_DELAY_MS    delay before the first respawn, doubled per attempt (default 1000)
//   PALACE_DEBUG=1             forward the server's stderr and log dropped lines
//   no knob: start-up (initialize + tools/list) gets 8 s; a child idle for 120 s is pinged first
//
// PLANTED DEFECTS:
// STDIO-02: a timed-out child gets SIGTERM only; a child that ignores SIGTERM is never SIGKILLed and outlives the session
// STDIO-06: the restart counter is reset as soon as a child spawns, so a server that dies during start-up is respawned forever

import { spawn, type ChildProcess } from "node:child_process";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  ConnectionClosedError, handshake, isAnswer, lineSplitter, parseMessage, sleep, unwrap,
  type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

const INIT_TIMEOUT_MS = 8_000;
const IDLE_PING_AFTER_MS = 120_000;
const STOP_WAIT_MS = 2_000;

interface Settings {
  toolTimeoutMs: number;
  requestTimeoutMs: number;
  maxRestarts: number;
  restartDelayMs: number;
  debug: boolean;
}

function setting(name: string, fallback: number, toMs = 1): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback * toMs;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) {
    console.error(`knobs: ignoring ${name}=${JSON.stringify(raw)} (not a non-negative number); using ${fallback}`);
    return fallback * toMs;
  }
  return Math.round(value * toMs);
}

function readSettings(): Settings {
  return {
    toolTimeoutMs: setting("PALACE_TOOL_TIMEOUT_S", 60, 1000),
    requestTimeoutMs: setting("PALACE_REQUEST_TIMEOUT_MS", 10_000),
    maxRestarts: setting("PALACE_MAX_RESTARTS", 2),
    restartDelayMs: setting("PALACE_RESTART_DELAY_MS", 1_000),
    debug: process.env.PALACE_DEBUG === "1",
  };
}

class TimeoutError extends Error {
  constructor(method: string, ms: number) {
    super(`palace request ${method} timed out after ${ms} ms`);
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

  constructor(private readonly debug: boolean) {
    // its own process group: signalled whole, and swept once the child exits (LIFE-06)
    this.proc = spawn("mempalace-mcp", [], { stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.exited = new Promise((resolve) => {
      this.proc.once("exit", (code, signal) => {
        this.fail(`mempalace-mcp exited (${signal ?? `code ${code}`})`);
        this.signal("SIGKILL");
        resolve();
      });
      this.proc.once("error", (error: NodeJS.ErrnoException) => {
        this.spawnError = error;
        this.fail(`mempalace-mcp could not be started (${error.code ?? error.message})`);
        resolve();
      });
    });
    this.proc.stdin!.on("error", () => undefined);
    this.proc.stdout!.setEncoding("utf8");
    this.proc.stdout!.on("data", lineSplitter((line) => this.onLine(line)));
    this.proc.stderr!.setEncoding("utf8");
    this.proc.stderr!.on("data", (chunk: string) => { if (this.debug) process.stderr.write(chunk); });
  }

  /** Signals the child's process group, so what it started goes with it (LIFE-06). */
  signal(signal: NodeJS.Signals): void {
    if (this.proc.pid === undefined) return;
    try {
      process.kill(-this.proc.pid, signal);
    } catch { /* the group is gone */ }
  }

  send(id: number, method: string, params: Record<string, unknown> | undefined, timeoutMs: number): Promise<RpcMessage> {
    if (this.gone) return Promise.reject(new ConnectionClosedError("mempalace-mcp is not running"));
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

  async notify(method: string): Promise<void> {
    this.write({ jsonrpc: "2.0", method });
  }

  private write(message: RpcMessage): void {
    if (!this.gone) this.proc.stdin!.write(`${JSON.stringify(message)}\n`);
  }

  private onLine(line: string): void {
    const message = parseMessage(line);
    if (!message) {
      if (this.debug) console.error(`knobs: dropping a stdout line that is not JSON-RPC: ${line.slice(0, 200)}`);
    } else if (isAnswer(message)) {
      const entry = typeof message.id === "number" ? this.pending.get(message.id) : undefined;
      if (!entry) {
        if (this.debug) console.error(`knobs: dropping an answer to unknown id ${JSON.stringify(message.id)}`);
        return;
      }
      this.pending.delete(message.id as number);
      clearTimeout(entry.timer);
      entry.resolve(message);
    } else if (message.method && message.id !== undefined) {
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

/** The supervised child: started on demand, respawned within a budget, latched once spent. */
class Palace {
  tools: McpTool[] = [];
  private child?: Child;
  private starting?: Promise<Child>;
  private state: "new" | "ready" | "dead" | "latched" | "stopped" = "new";
  private restarts = 0;
  private why = "";
  private nextId = 1;
  private lastUsed = 0;

  constructor(private readonly settings: Settings) {}

  async call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    const child = await this.ready();
    return unwrap(await this.request(child, "tools/call", { name, arguments: args }, this.settings.toolTimeoutMs)) as ToolResult;
  }

  async ready(): Promise<Child> {
    const child = this.child;
    if (child && this.state === "ready" && !child.gone) {
      if (Date.now() - this.lastUsed < IDLE_PING_AFTER_MS) return child;
      try {
        await this.request(child, "ping", undefined, this.settings.requestTimeoutMs);
        return child;
      } catch { /* replaced below */ }
    }
    if (this.state === "ready") this.died(this.child, "mempalace-mcp stopped answering");
    this.starting ??= this.start().finally(() => { this.starting = undefined; });
    return this.starting;
  }

  async stop(): Promise<void> {
    this.state = "stopped";
    const child = this.child;
    this.child = undefined;
    if (child) await stopChild(child);
  }

  private async request(child: Child, method: string, params: Record<string, unknown> | undefined,
    timeoutMs: number): Promise<RpcMessage> {
    try {
      const answer = await child.send(this.nextId++, method, params, timeoutMs);
      this.lastUsed = Date.now();
      if (child === this.child) this.restarts = 0; // any answer proves the server is alive
      return answer;
    } catch (error) {
      if (error instanceof TimeoutError) this.died(child, error.message);
      else if (error instanceof ConnectionClosedError) this.died(child, error.message);
      throw error;
    }
  }

  private died(child: Child | undefined, why: string): void {
    if (child && child === this.child) {
      this.child = undefined;
      this.state = "dead";
      this.why = why;
    }
    if (child && !child.gone) child.signal("SIGTERM");
  }

  private async start(): Promise<Child> {
    for (;;) {
      if (this.state === "stopped") throw new Error("palace unavailable: the session has ended");
      if (this.state === "latched") throw new Error(`palace unavailable: ${this.why}`);
      if (this.state === "dead") {
        if (this.restarts >= this.settings.maxRestarts) {
          this.state = "latched";
          this.why = `gave up after ${this.settings.maxRestarts} restart(s); last failure: ${this.why}`;
          continue;
        }
        this.restarts += 1;
        await sleep(this.settings.restartDelayMs * 2 ** (this.restarts - 1));
        if (this.state === "stopped") continue;
      }
      const child = new Child(this.settings.debug);
      child.proc.once("spawn", () => { this.restarts = 0; });
      try {
        this.tools = await this.handshake(child);
      } catch (error) {
        this.why = (error as Error).message;
        this.state = child.spawnError ? "latched" : "dead";
        if (!child.gone) child.signal("SIGTERM");
        await exitWithin(child, STOP_WAIT_MS);
        continue;
      }
      if (this.state === "stopped") {
        await stopChild(child);
        continue;
      }
      this.child = child;
      this.state = "ready";
      this.restarts = 0;
      this.lastUsed = Date.now();
      return child;
    }
  }

  private handshake(child: Child): Promise<McpTool[]> {
    const deadline = Date.now() + INIT_TIMEOUT_MS;
    const left = () => Math.max(1, deadline - Date.now());
    return handshake(
      async (method, params) => unwrap(await child.send(this.nextId++, method, params, left())),
      (method) => child.notify(method), "knobs-bridge");
  }
}

/** Close stdin and let the server exit; SIGTERM, then SIGKILL, only if it does not. */
async function stopChild(child: Child): Promise<void> {
  child.proc.stdin!.end();
  if (await exitWithin(child, STOP_WAIT_MS)) return;
  child.signal("SIGTERM");
  if (await exitWithin(child, STOP_WAIT_MS)) return;
  child.signal("SIGKILL");
  await exitWithin(child, STOP_WAIT_MS);
}

export default function knobs(pi: ExtensionAPI) {
  const palace = new Palace(readSettings());
  let registered = false;

  pi.on("session_start", async () => {
    if (registered) return;
    try {
      await palace.ready();
    } catch (error) {
      console.error(`knobs: mempalace-mcp unavailable (${(error as Error).message}); continuing without palace tools`);
      return;
    }
    registered = true;
    for (const tool of palace.tools) {
      pi.registerTool({
        name: tool.name,
        label: tool.name,
        description: tool.description ?? "",
        parameters: Type.Unsafe(tool.inputSchema),
        async execute(_id, params) {
          const result = await palace.call(tool.name, params as Record<string, unknown>);
          return { content: (result.content ?? []) as never, details: undefined, isError: Boolean(result.isError) };
        },
      });
    }
  });

  pi.on("session_shutdown", async () => {
    await palace.stop();
  });
}
