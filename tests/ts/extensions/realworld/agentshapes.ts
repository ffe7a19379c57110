// agentshapes: a pi <-> MemPalace bridge of the "built for the agent UI" family.
//
// It runs `mempalace-mcp` from PATH like the seed, with the seed's knobs (MEMPALACE_MCP_TIMEOUT_MS,
// MEMPALACE_MCP_INIT_TIMEOUT_MS, MEMPALACE_MCP_MAX_RESPAWNS, MEMPALACE_MCP_RESPAWN_BACKOFF_MS,
// MEMPALACE_EXT_DEBUG, MEMPALACE_AGENT_NAME), but talks to the agent and the user the way
// UI-minded pi extensions do:
//
// - a failed palace call is a tool result with isError: true (what went wrong in the text, the
//   JSON-RPC code, message and data in details), never a thrown error;
// - the wake-up (mempalace_status + mempalace_diary_read) is appended to the system prompt that
//   before_agent_start returns, not injected as a message;
// - diagnostics go to ctx.ui.notify (level "warning" or "error"), never to stderr, and a toast
//   (level "info") says the palace is connecting at start-up;
// - session_start returns at once; the tools are registered when the background connect is done;
// - at shutdown the child gets SIGTERM (SIGKILL after a grace); its stdin is not closed first.
//
// PLANTED DEFECTS:
// STDIO-05: once the child has died (crash or stall-kill) it is never respawned: every later call answers "not running" until pi restarts
// TOOL-01: tool schemas are "cleaned" to type/properties/required, dropping every other keyword (additionalProperties, $defs, title, ...)

import { spawn, type ChildProcess } from "node:child_process";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  answerServerRequest, ConnectionClosedError, handshake, isAnswer, isServerRequest, lineSplitter, parseMessage, RpcError, sleep,
  textOf, unwrap,
  type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

const KILL_GRACE_MS = 2_000;
const FRESH = new Set(["startup", "new"]);

function intEnv(name: string, fallback: number, warn: (text: string) => void): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (Number.isInteger(value) && value >= 0) return value;
  warn(`MemPalace: ignoring ${name}=${JSON.stringify(raw)}; using ${fallback}`);
  return fallback;
}

/** Providers choke on exotic JSON Schema keywords; keep what every model understands. */
function cleanSchema(schema: Record<string, unknown>): Record<string, unknown> {
  return {
    type: "object",
    properties: schema.properties ?? {},
    ...(Array.isArray(schema.required) ? { required: schema.required } : {}),
  };
}

class TimeoutError extends Error {
  constructor(method: string, ms: number) {
    super(`MemPalace ${method} timed out after ${ms} ms`);
    this.name = "TimeoutError";
  }
}

interface Pending { resolve: (answer: RpcMessage) => void; reject: (error: Error) => void; timer?: NodeJS.Timeout }

class Child {
  readonly proc: ChildProcess;
  readonly exited: Promise<void>;
  gone = false;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(private readonly debug: (text: string) => void) {
    // its own process group: signalled whole, and swept once the child exits (LIFE-06)
    this.proc = spawn("mempalace-mcp", [], { stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.exited = new Promise((resolve) => {
      this.proc.once("exit", (code, signal) => {
        this.fail(`mempalace-mcp exited (${signal ?? `code ${code}`})`);
        this.signal("SIGKILL");
        resolve();
      });
      this.proc.once("error", (error) => { this.fail(`mempalace-mcp could not be started (${error.message})`); resolve(); });
    });
    this.proc.stdin!.on("error", () => undefined);
    this.proc.stdout!.setEncoding("utf8");
    this.proc.stdout!.on("data", lineSplitter((line) => this.onLine(line)));
    this.proc.stderr!.setEncoding("utf8");
    this.proc.stderr!.on("data", (chunk: string) => debug(chunk.trimEnd()));
  }

  request(method: string, params: Record<string, unknown> | undefined, timeoutMs: number): Promise<unknown> {
    if (this.gone) return Promise.reject(new ConnectionClosedError("mempalace-mcp is not running"));
    const id = this.nextId++;
    return new Promise<RpcMessage>((resolve, reject) => {
      const entry: Pending = { resolve, reject };
      if (timeoutMs > 0) {
        entry.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new TimeoutError(method, timeoutMs));
          void this.kill();
        }, timeoutMs);
      }
      this.pending.set(id, entry);
      this.write({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
    }).then(unwrap);
  }

  async notify(method: string): Promise<void> {
    this.write({ jsonrpc: "2.0", method });
  }

  async kill(): Promise<void> {
    if (this.gone) return;
    this.signal("SIGTERM");
    if (await Promise.race([this.exited.then(() => true), sleep(KILL_GRACE_MS).then(() => this.gone)])) return;
    this.signal("SIGKILL");
    await Promise.race([this.exited, sleep(KILL_GRACE_MS)]);
  }

  /** Signals the child's process group, so what it started goes with it (LIFE-06). */
  signal(signal: NodeJS.Signals): void {
    if (this.proc.pid === undefined) return;
    try {
      process.kill(-this.proc.pid, signal);
    } catch { /* the group is gone */ }
  }

  private write(message: RpcMessage): void {
    if (!this.gone) this.proc.stdin!.write(`${JSON.stringify(message)}\n`);
  }

  private onLine(line: string): void {
    const message = parseMessage(line);
    if (!message) return this.debug(`dropped a line that is not JSON-RPC: ${line.slice(0, 200)}`);
    if (isAnswer(message) && typeof message.id === "number") {
      const entry = this.pending.get(message.id);
      if (!entry) return;
      this.pending.delete(message.id);
      clearTimeout(entry.timer);
      entry.resolve(message);
    } else if (isServerRequest(message)) {
      this.write(answerServerRequest(message));
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

/** A failed call as the agent should see it: a result it can read, with the details kept. */
function failure(error: unknown): { content: Array<{ type: "text"; text: string }>; details: unknown; isError: true } {
  const rpc = error instanceof RpcError ? { code: error.code, message: error.message, data: error.data } : undefined;
  const text = rpc ? `MemPalace error ${rpc.code}: ${rpc.message}` : `MemPalace call failed: ${(error as Error)?.message ?? error}`;
  return { content: [{ type: "text", text }], details: { error: rpc ?? { message: (error as Error)?.message ?? String(error) } }, isError: true };
}

export default function agentshapes(pi: ExtensionAPI) {
  let ui: ExtensionContext["ui"] | undefined;
  const say = (text: string, level: "info" | "warning" | "error") => ui?.notify(text, level);
  const debugOn = process.env.MEMPALACE_EXT_DEBUG === "1";
  const debug = (text: string) => { if (debugOn) say(`MemPalace debug: ${text}`, "info"); };
  const pending: string[] = [];
  const warn = (text: string) => (ui ? say(text, "warning") : pending.push(text));
  const timeoutMs = intEnv("MEMPALACE_MCP_TIMEOUT_MS", 60_000, warn);
  const initTimeoutMs = intEnv("MEMPALACE_MCP_INIT_TIMEOUT_MS", 300_000, warn);
  const attempts = 1 + intEnv("MEMPALACE_MCP_MAX_RESPAWNS", 2, warn);
  const backoffMs = intEnv("MEMPALACE_MCP_RESPAWN_BACKOFF_MS", 1_000, warn);
  const agentName = process.env.MEMPALACE_AGENT_NAME || "pi";
  let child: Child | undefined;
  let connecting: Promise<void> | undefined;
  let wakeupDue = false;
  let stopped = false;

  async function start(): Promise<McpTool[]> {
    let why = "";
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (attempt > 1) await sleep(backoffMs * 2 ** (attempt - 2));
      const next = new Child(debug);
      const deadline = Date.now() + initTimeoutMs;
      const left = () => (initTimeoutMs === 0 ? 0 : Math.max(1, deadline - Date.now()));
      try {
        const tools = await handshake((method, params) => next.request(method, params, left()),
          (method) => next.notify(method), "agentshapes");
        if (stopped) throw new Error("the session ended while connecting");
        child = next;
        return tools;
      } catch (error) {
        why = (error as Error).message;
        await next.kill();
      }
    }
    throw new Error(why);
  }

  async function call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    if (!child || child.gone) throw new Error("MemPalace is not running (it stopped during this session); restart pi");
    return await child.request("tools/call", { name, arguments: args }, timeoutMs) as ToolResult;
  }

  pi.on("session_start", async (event, ctx) => {
    ui = ctx.ui;
    wakeupDue = FRESH.has(String(event.reason));
    for (const text of pending.splice(0)) say(text, "warning");
    if (connecting) return;
    say("MemPalace: connecting to your palace…", "info");
    connecting = start().then((tools) => {
      for (const tool of tools) {
        pi.registerTool({
          name: tool.name,
          label: tool.name,
          description: tool.description ?? "",
          parameters: Type.Unsafe(cleanSchema(tool.inputSchema)),
          async execute(_id, params) {
            try {
              const result = await call(tool.name, params as Record<string, unknown>);
              return { content: (result.content ?? []) as never, details: undefined, isError: Boolean(result.isError) };
            } catch (error) {
              return failure(error);
            }
          },
        });
      }
    }, (error) => {
      say(`MemPalace unavailable (${(error as Error).message}); continuing without palace tools`, "error");
    });
  });

  pi.on("before_agent_start", async (event) => {
    if (!wakeupDue) return undefined;
    wakeupDue = false;
    try {
      await connecting;
      const status = await call("mempalace_status", {});
      const diary = await call("mempalace_diary_read", { agent_name: agentName });
      if (status.isError || diary.isError) return undefined;
      const wakeup = "## MemPalace wake-up\nYour long-term memory for this session.\n\n"
        + `### Palace status (mempalace_status)\n${textOf(status)}\n\n`
        + `### Your diary (mempalace_diary_read, agent_name=${agentName})\n${textOf(diary)}`;
      return { systemPrompt: `${event.systemPrompt ?? ""}\n\n${wakeup}` };
    } catch (error) {
      debug(`wake-up skipped: ${(error as Error).message}`);
      return undefined;
    }
  });

  pi.on("session_shutdown", async () => {
    stopped = true;
    const stopping = child;
    child = undefined;
    await stopping?.kill();
  });
}
