// onetimeout: a pi <-> MemPalace bridge of the "one timeout for everything" family.
//
// It does what the seed's stdio path does (spawns `mempalace-mcp` from PATH, registers every palace
// tool with its schema unchanged, bounds every wait, kills a stalled child with SIGTERM and then
// SIGKILL to its process group, respawns a dead one with a doubling backoff, closes the child
// politely at shutdown), but it has ONE timeout: MEMPALACE_MCP_TIMEOUT_MS (default 5000) bounds
// every request, `initialize` and `tools/list` included; it has no start-up budget of its own.
// Every other number is a constant:
//
//   respawn budget: 2, first delay 500 ms, doubled   stop: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL
//   a stalled child: SIGTERM, 2 s, SIGKILL            the server's stderr is always read and dropped
//
// Its profile says MEMPALACE_MCP_INIT_TIMEOUT_MS is `same_as` MEMPALACE_MCP_TIMEOUT_MS: a scenario
// that sets a short request timeout only for pace gets one long enough for a start of the palace
// (the kit raises it and derives its windows), so a loaded machine does not cut the handshake.
//
// PLANTED DEFECTS:
// (none: it is the kit's stability subject, benchmarks/verdict_stability.py)

import { spawn, type ChildProcess } from "node:child_process";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  ConnectionClosedError, handshake, isAnswer, lineSplitter, parseMessage, sleep, unwrap,
  type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

/** The one timeout: every request, the handshake's too. */
function requestTimeoutMs(): number {
  const raw = process.env.MEMPALACE_MCP_TIMEOUT_MS?.trim();
  const value = raw ? Number(raw) : NaN;
  return Number.isInteger(value) && value >= 0 ? value : 5_000;
}
const KILL_GRACE_MS = 2_000;
const MAX_RESTARTS = 2;
const RESTART_DELAY_MS = 500;
const STOP_WAIT_MS = 2_000;

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

  constructor() {
    // its own process group (detached): signals go to the group, grandchildren included
    this.proc = spawn("mempalace-mcp", [], { stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.exited = new Promise((resolve) => {
      this.proc.once("exit", (code, signal) => {
        this.fail(`mempalace-mcp exited (${signal ?? `code ${code}`})`);
        this.signal("SIGKILL"); // what it started goes with it
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
    this.proc.stderr!.on("data", () => undefined); // always drained, never shown
  }

  /** Signals the child's process group (what it started goes with it). */
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
      return; // not JSON-RPC: dropped
    } else if (isAnswer(message)) {
      const entry = typeof message.id === "number" ? this.pending.get(message.id) : undefined;
      if (!entry) return; // an answer to an unknown id: dropped
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

  async call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    const child = await this.ready();
    const answer = await this.request(child, "tools/call", { name, arguments: args }, requestTimeoutMs());
    return unwrap(answer) as ToolResult;
  }

  async ready(): Promise<Child> {
    const child = this.child;
    if (child && this.state === "ready" && !child.gone) return child;
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
      if (child === this.child) this.restarts = 0; // any answer proves the server is alive
      return answer;
    } catch (error) {
      if (error instanceof TimeoutError) this.kill(child, error.message);
      else if (error instanceof ConnectionClosedError) this.died(child, error.message);
      throw error;
    }
  }

  /** A stalled child: SIGTERM, and SIGKILL if it is still there after the grace. */
  private kill(child: Child, why: string): void {
    this.died(child, why);
    void exitWithin(child, KILL_GRACE_MS).then((gone) => { if (!gone) child.signal("SIGKILL"); });
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
        if (this.restarts >= MAX_RESTARTS) {
          this.state = "latched";
          this.why = `gave up after ${MAX_RESTARTS} restart(s); last failure: ${this.why}`;
          continue;
        }
        this.restarts += 1;
        await sleep(RESTART_DELAY_MS * 2 ** (this.restarts - 1));
        if (this.state === "stopped") continue;
      }
      const child = new Child();
      try {
        this.tools = await this.handshake(child);
      } catch (error) {
        this.why = (error as Error).message;
        this.state = child.spawnError ? "latched" : "dead";
        if (!child.gone) await stopChild(child);
        continue;
      }
      if (this.state === "stopped") {
        await stopChild(child);
        continue;
      }
      this.child = child;
      this.state = "ready";
      this.restarts = 0;
        return child;
    }
  }

  private handshake(child: Child): Promise<McpTool[]> {
    const timeoutMs = requestTimeoutMs(); // the one timeout bounds the handshake too (0: none)
    const deadline = Date.now() + timeoutMs;
    const left = () => (timeoutMs === 0 ? 0 : Math.max(1, deadline - Date.now()));
    return handshake(
      async (method, params) => unwrap(await child.send(this.nextId++, method, params, left())),
      (method) => child.notify(method), "onetimeout-bridge");
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

export default function onetimeout(pi: ExtensionAPI) {
  const palace = new Palace();
  let registered = false;

  pi.on("session_start", async () => {
    if (registered) return;
    try {
      await palace.ready();
    } catch (error) {
      console.error(`onetimeout: mempalace-mcp unavailable (${(error as Error).message}); continuing without palace tools`);
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
