// fixedconst: a pi <-> MemPalace bridge of the "no knobs at all" family.
//
// It does what the seed's stdio path does (spawns `mempalace-mcp` from PATH, registers every palace
// tool with its schema unchanged, bounds every wait, kills a stalled child, respawns a dead one
// with a doubling backoff, closes the child politely at shutdown), but its author hard-coded every
// number and reads no environment variable at all, so an honest profile declares every seed knob
// `fixed` or `absent`:
//
//   tools/call and any other request: 5 s          start-up (initialize + tools/list): 5 s
//   respawn budget: 2, first delay 500 ms, doubled   stop: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL
//   the server's stderr is always read and dropped   no idle ping, no debug, no feeding, no mailbox
//
// PLANTED DEFECTS:
// STDIO-02: a timed-out call leaves its stalled child running (never signalled) and starts a new one for the next call
// LIFE-06: a child is signalled by its pid alone, never its process group, so what it started outlives it
// TOOL-04: a JSON-RPC error reaches the agent as its message alone: the code and data are dropped

import { spawn, type ChildProcess } from "node:child_process";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  ConnectionClosedError, RpcError, handshake, isAnswer, lineSplitter, parseMessage, sleep, unwrap,
  type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

const REQUEST_TIMEOUT_MS = 5_000;
const INIT_TIMEOUT_MS = 5_000;
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
    // its own process group (detached), but see signal(): only the child itself is ever signalled
    this.proc = spawn("mempalace-mcp", [], { stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.exited = new Promise((resolve) => {
      this.proc.once("exit", (code, signal) => {
        this.fail(`mempalace-mcp exited (${signal ?? `code ${code}`})`);
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

  /** Signals the child. PLANTED DEFECT LIFE-06: its pid alone, not its process group, so what it
   *  started (a grandchild) is never signalled and outlives it. */
  signal(signal: NodeJS.Signals): void {
    if (this.proc.pid === undefined) return;
    try {
      process.kill(this.proc.pid, signal);
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
    const answer = await this.request(child, "tools/call", { name, arguments: args }, REQUEST_TIMEOUT_MS);
    try {
      return unwrap(answer) as ToolResult;
    } catch (error) {
      // PLANTED DEFECT TOOL-04: the code and data of a JSON-RPC error are dropped
      if (error instanceof RpcError) throw new Error(error.message);
      throw error;
    }
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
      // PLANTED DEFECT STDIO-02: a timed-out child is forgotten, never signalled: it stays running
      if (error instanceof TimeoutError) this.forget(child, error.message);
      else if (error instanceof ConnectionClosedError) this.died(child, error.message);
      throw error;
    }
  }

  private forget(child: Child, why: string): void {
    if (child === this.child) {
      this.child = undefined;
      this.state = "dead";
      this.why = why;
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
    const deadline = Date.now() + INIT_TIMEOUT_MS;
    const left = () => Math.max(1, deadline - Date.now());
    return handshake(
      async (method, params) => unwrap(await child.send(this.nextId++, method, params, left())),
      (method) => child.notify(method), "fixedconst-bridge");
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

export default function fixedconst(pi: ExtensionAPI) {
  const palace = new Palace();
  let registered = false;

  pi.on("session_start", async () => {
    if (registered) return;
    try {
      await palace.ready();
    } catch (error) {
      console.error(`fixedconst: mempalace-mcp unavailable (${(error as Error).message}); continuing without palace tools`);
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
