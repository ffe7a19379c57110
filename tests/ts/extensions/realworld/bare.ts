// bare: a pi <-> MemPalace bridge of the "no knobs, no timers" family.
//
// The simplest bridge that still cleans up after itself: it spawns `mempalace-mcp` from PATH,
// registers every palace tool with its schema unchanged, fails the calls in flight at once when
// the child exits, never respawns (a dead child is final: every later call fails at once, "not
// running"), surfaces JSON-RPC errors with their code and data, drains the server's stderr, and
// at shutdown closes stdin and kills the child's process group at once (so nothing it started
// outlives it). It has no timer of any kind and reads no environment variable, so its honest
// profile declares every seed knob `absent`: no timeout, no start-up budget, no respawn (budget
// 0), no backoff, no kill grace, no idle ping, no debug, no remote palace, no feeding, no mailbox.
//
// PLANTED DEFECTS:
// STDIO-01: no request is ever bounded: a stalled call waits as long as the child lives
// STDIO-05: a child that died is never respawned; every later call fails at once ("not running")
// LIFE-06: at shutdown the child gets no grace: stdin closed and its group SIGKILLed at once

import { spawn, type ChildProcess } from "node:child_process";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  ConnectionClosedError, handshake, isAnswer, lineSplitter, parseMessage, unwrap,
  type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

interface Pending { resolve: (answer: RpcMessage) => void; reject: (error: Error) => void }

/** One `mempalace-mcp` process and the requests waiting on it. */
class Child {
  readonly proc: ChildProcess;
  readonly pending = new Map<number, Pending>();
  readonly exited: Promise<void>;
  gone = false;
  spawnError?: NodeJS.ErrnoException;

  constructor() {
    // its own process group (detached), signalled as a group: what it started dies with it
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

  /** Signals the child's process group (the child and what it started). */
  signal(signal: NodeJS.Signals): void {
    if (this.proc.pid === undefined) return;
    try {
      process.kill(-this.proc.pid, signal);
    } catch { /* the group is gone */ }
  }

  /** PLANTED DEFECT STDIO-01: no timer: a request waits for its answer or the child's exit. */
  send(id: number, method: string, params: Record<string, unknown> | undefined): Promise<RpcMessage> {
    if (this.gone) return Promise.reject(new ConnectionClosedError("mempalace-mcp is not running"));
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
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
      entry.resolve(message);
    } else if (message.method && message.id !== undefined) {
      const reply = message.method === "ping" ? { result: {} } : { error: { code: -32601, message: "Method not found" } };
      this.write({ jsonrpc: "2.0", id: message.id, ...reply });
    }
  }

  private fail(reason: string): void {
    this.gone = true;
    for (const entry of this.pending.values()) {
      entry.reject(new ConnectionClosedError(reason));
    }
    this.pending.clear();
  }
}

/** The child: started once; once it is gone (or never came up), calls fail at once. */
class Palace {
  tools: McpTool[] = [];
  private child?: Child;
  private starting?: Promise<Child>;
  private state: "new" | "ready" | "dead" | "stopped" = "new";
  private why = "";
  private nextId = 1;

  async call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    const child = await this.ready();
    return unwrap(await this.request(child, "tools/call", { name, arguments: args })) as ToolResult;
  }

  async ready(): Promise<Child> {
    const child = this.child;
    if (child && this.state === "ready" && !child.gone) return child;
    if (this.state === "ready") this.died(child, "mempalace-mcp stopped answering");
    // PLANTED DEFECT STDIO-05: a child that died is never respawned
    if (this.state === "dead") throw new Error(`palace unavailable: mempalace-mcp is not running (${this.why})`);
    if (this.state === "stopped") throw new Error("palace unavailable: the session has ended");
    this.starting ??= this.start().finally(() => { this.starting = undefined; });
    return this.starting;
  }

  async stop(): Promise<void> {
    this.state = "stopped";
    const child = this.child;
    this.child = undefined;
    if (child) await stopChild(child);
  }

  private async request(child: Child, method: string, params: Record<string, unknown> | undefined): Promise<RpcMessage> {
    try {
      return await child.send(this.nextId++, method, params);
    } catch (error) {
      if (error instanceof ConnectionClosedError) this.died(child, error.message);
      throw error;
    }
  }

  private died(child: Child | undefined, why: string): void {
    if (child && child === this.child) {
      this.child = undefined;
      this.state = "dead";
      this.why = why;
    }
    if (child && !child.gone) child.signal("SIGKILL");
  }

  private async start(): Promise<Child> {
    const child = new Child();
    try {
      this.tools = await handshake(
        async (method, params) => unwrap(await child.send(this.nextId++, method, params)),
        (method) => child.notify(method), "bare-bridge");
    } catch (error) {
      this.state = "dead";
      this.why = (error as Error).message;
      if (!child.gone) await stopChild(child);
      throw error;
    }
    if (this.state === "stopped") {
      await stopChild(child);
      throw new Error("palace unavailable: the session has ended");
    }
    this.child = child;
    this.state = "ready";
    return child;
  }
}

/** Close stdin, then kill the process group at once: no grace period, no timer. PLANTED DEFECT
 *  LIFE-06: the child is never given the time to exit on its own (nor a SIGTERM). */
async function stopChild(child: Child): Promise<void> {
  child.proc.stdin!.end();
  child.signal("SIGKILL");
  await child.exited;
}

export default function bare(pi: ExtensionAPI) {
  const palace = new Palace();
  let registered = false;

  pi.on("session_start", async () => {
    if (registered) return;
    try {
      await palace.ready();
    } catch (error) {
      console.error(`bare: mempalace-mcp unavailable (${(error as Error).message}); continuing without palace tools`);
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
