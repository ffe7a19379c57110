// pyspawn: a pi <-> MemPalace bridge of the "run the Python module" family.
//
// Bridges of this family do not exec the `mempalace-mcp` console script; they find the Python
// that has mempalace installed and run `python -m mempalace.mcp_server` themselves. The
// interpreter is the one named by the shebang of `mempalace-mcp` on PATH when that is a Python
// (pipx and `uv tool` installs point it at the right venv), else `python3`. Before the first
// spawn the bridge checks `python -c "import mempalace"`, so a missing package costs one clear
// line instead of a crash loop.
//
// Settings: PYSPAWN_TIMEOUT_MS is the per-request timeout (default 60000; 0 = none). The seed's
// MEMPALACE_MCP_INIT_TIMEOUT_MS, MEMPALACE_MCP_MAX_RESPAWNS, MEMPALACE_MCP_RESPAWN_BACKOFF_MS and
// MEMPALACE_EXT_DEBUG are read under their own names, with the seed's defaults.
//
// PLANTED DEFECTS:
// STDIO-11: the child's stderr is piped but only read when MEMPALACE_EXT_DEBUG=1, so a chatty server blocks once the pipe is full
// STDIO-12: a child that exits mid-request does not fail the calls in flight; they wait for their timeout (forever with 0)

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { accessSync, closeSync, constants, openSync, readSync } from "node:fs";
import path from "node:path";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import {
  answerServerRequest, ConnectionClosedError, handshake, isAnswer, isServerRequest, lineSplitter, parseMessage, sleep, unwrap,
  type McpTool, type RpcMessage, type ToolResult,
} from "./mcp-wire";

const KILL_GRACE_MS = 2_000;

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) {
    console.error(`pyspawn: ignoring ${name}=${JSON.stringify(raw)} (not a non-negative integer); using ${fallback}`);
    return fallback;
  }
  return value;
}

function onPath(program: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter).filter(Boolean)) {
    try {
      accessSync(path.join(dir, program), constants.X_OK);
      return path.join(dir, program);
    } catch { /* try the next directory */ }
  }
  return undefined;
}

/** The interpreter named by `#!` of the mempalace-mcp script, when it is a Python; else python3. */
function findPython(): string {
  const script = onPath("mempalace-mcp");
  if (script) {
    const head = Buffer.alloc(256);
    let read = 0;
    try {
      const fd = openSync(script, "r");
      read = readSync(fd, head, 0, head.length, 0);
      closeSync(fd);
    } catch { /* unreadable: fall back */ }
    const shebang = /^#!\s*(\S+)(?:\s+(\S+))?/.exec(head.subarray(0, read).toString("utf8").split("\n")[0]);
    const isPython = (name?: string) => Boolean(name && /^python[0-9.]*$/.test(path.basename(name)));
    if (shebang && isPython(shebang[1])) return shebang[1];
    if (shebang && path.basename(shebang[1]) === "env" && isPython(shebang[2])) return shebang[2];
  }
  return "python3";
}

/** undefined when `python -c "import mempalace"` works, else the reason in a few words. */
function probe(python: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(python, ["-c", "import mempalace"], { timeout: 15_000 }, (error, _stdout, stderr) => {
      if (!error) return resolve(undefined);
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return resolve(`${python} not found`);
      const last = String(stderr).trim().split("\n").pop();
      resolve(`${python} cannot import mempalace: ${last || error.message}`);
    });
  });
}

class TimeoutError extends Error {
  constructor(method: string, ms: number) {
    super(`mempalace request ${method} timed out after ${ms} ms`);
    this.name = "TimeoutError";
  }
}

interface Pending { resolve: (answer: RpcMessage) => void; reject: (error: Error) => void; timer?: NodeJS.Timeout }

class Server {
  readonly proc: ChildProcess;
  readonly pending = new Map<number, Pending>();
  readonly exited: Promise<void>;
  gone = false;

  constructor(python: string, private readonly debug: boolean) {
    // its own process group: signalled whole, and swept once the child exits (LIFE-06)
    this.proc = spawn(python, ["-m", "mempalace.mcp_server"], { stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.exited = new Promise((resolve) => {
      this.proc.once("exit", () => { this.gone = true; this.signal("SIGKILL"); resolve(); });
      this.proc.once("error", (error) => {
        this.gone = true;
        for (const entry of this.pending.values()) {
          clearTimeout(entry.timer);
          entry.reject(new ConnectionClosedError(error.message));
        }
        this.pending.clear();
        resolve();
      });
    });
    this.proc.stdin!.on("error", () => undefined);
    this.proc.stdout!.setEncoding("utf8");
    this.proc.stdout!.on("data", lineSplitter((line) => this.onLine(line)));
    if (debug) this.proc.stderr!.on("data", (chunk) => process.stderr.write(`[mempalace] ${chunk}`));
  }

  send(id: number, method: string, params: Record<string, unknown> | undefined, timeoutMs: number): Promise<RpcMessage> {
    if (this.gone) return Promise.reject(new ConnectionClosedError("the mempalace server is not running"));
    return new Promise((resolve, reject) => {
      const entry: Pending = { resolve, reject };
      if (timeoutMs > 0) {
        entry.timer = setTimeout(() => { this.pending.delete(id); reject(new TimeoutError(method, timeoutMs)); }, timeoutMs);
      }
      this.pending.set(id, entry);
      this.write({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
    });
  }

  async notify(method: string): Promise<void> {
    this.write({ jsonrpc: "2.0", method });
  }

  /** SIGTERM now, SIGKILL after the grace if it is still there. */
  async kill(): Promise<void> {
    if (this.gone) return;
    this.signal("SIGTERM");
    if (await this.exitWithin(KILL_GRACE_MS)) return;
    this.signal("SIGKILL");
    await this.exitWithin(KILL_GRACE_MS);
  }

  /** LIFE-06: close stdin and wait, then kill. */
  async stop(): Promise<void> {
    this.proc.stdin!.end();
    if (!(await this.exitWithin(KILL_GRACE_MS))) await this.kill();
  }

  /** Signals the child's process group, so what it started goes with it (LIFE-06). */
  signal(signal: NodeJS.Signals): void {
    if (this.proc.pid === undefined) return;
    try {
      process.kill(-this.proc.pid, signal);
    } catch { /* the group is gone */ }
  }

  exitWithin(ms: number): Promise<boolean> {
    return Promise.race([this.exited.then(() => true), sleep(ms).then(() => this.gone)]);
  }

  private write(message: RpcMessage): void {
    if (!this.gone) this.proc.stdin!.write(`${JSON.stringify(message)}\n`);
  }

  private onLine(line: string): void {
    const message = parseMessage(line);
    if (!message) {
      if (this.debug) console.error(`pyspawn: dropped a malformed line from the server: ${line.slice(0, 200)}`);
      return;
    }
    if (isAnswer(message)) {
      const entry = typeof message.id === "number" ? this.pending.get(message.id) : undefined;
      if (!entry) return;
      this.pending.delete(message.id as number);
      clearTimeout(entry.timer);
      entry.resolve(message);
    } else if (isServerRequest(message)) {
      this.write(answerServerRequest(message));
    }
  }
}

class Palace {
  tools: McpTool[] = [];
  private server?: Server;
  private starting?: Promise<Server>;
  private state: "new" | "ready" | "dead" | "latched" | "stopped" = "new";
  private used = 0;
  private why = "";
  private nextId = 1;
  private python?: string;
  private readonly timeoutMs = intEnv("PYSPAWN_TIMEOUT_MS", 60_000);
  private readonly initTimeoutMs = intEnv("MEMPALACE_MCP_INIT_TIMEOUT_MS", 300_000);
  private readonly maxRespawns = intEnv("MEMPALACE_MCP_MAX_RESPAWNS", 2);
  private readonly backoffMs = intEnv("MEMPALACE_MCP_RESPAWN_BACKOFF_MS", 1_000);
  private readonly debug = process.env.MEMPALACE_EXT_DEBUG === "1";

  async call(name: string, args: Record<string, unknown>): Promise<ToolResult> {
    const server = await this.ready();
    try {
      const answer = await server.send(this.nextId++, "tools/call", { name, arguments: args }, this.timeoutMs);
      if (server === this.server) this.used = 0;
      return unwrap(answer) as ToolResult;
    } catch (error) {
      if (error instanceof TimeoutError || error instanceof ConnectionClosedError) this.retire(server, (error as Error).message);
      throw error;
    }
  }

  ready(): Promise<Server> {
    if (this.server && !this.server.gone) return Promise.resolve(this.server);
    if (this.server) this.retire(this.server, "the mempalace server exited");
    this.starting ??= this.start().finally(() => { this.starting = undefined; });
    return this.starting;
  }

  async stop(): Promise<void> {
    this.state = "stopped";
    const server = this.server;
    this.server = undefined;
    await server?.stop();
  }

  private retire(server: Server, why: string): void {
    if (server === this.server) {
      this.server = undefined;
      this.state = "dead";
      this.why = why;
    }
    void server.kill();
  }

  private async start(): Promise<Server> {
    if (this.python === undefined) {
      const python = findPython();
      const problem = await probe(python);
      if (problem) {
        this.state = "latched";
        this.why = problem;
      }
      this.python = python;
    }
    for (;;) {
      if (this.state === "stopped") throw new Error("mempalace unavailable: the session has ended");
      if (this.state === "latched") throw new Error(`mempalace unavailable: ${this.why}`);
      if (this.state === "dead") {
        if (this.used >= this.maxRespawns) {
          this.state = "latched";
          this.why = `respawn budget spent (${this.maxRespawns}); last failure: ${this.why}`;
          continue;
        }
        this.used += 1;
        await sleep(this.backoffMs * 2 ** (this.used - 1));
        if (this.state === "stopped") continue;
      }
      const server = new Server(this.python, this.debug);
      const deadline = Date.now() + this.initTimeoutMs;
      const left = () => (this.initTimeoutMs === 0 ? 0 : Math.max(1, deadline - Date.now()));
      try {
        this.tools = await handshake(
          async (method, params) => unwrap(await server.send(this.nextId++, method, params, left())),
          (method) => server.notify(method), "pyspawn");
      } catch (error) {
        this.state = "dead";
        this.why = (error as Error).message;
        await server.kill();
        continue;
      }
      if (this.state === "stopped") {
        await server.stop();
        continue;
      }
      this.server = server;
      this.state = "ready";
      this.used = 0;
      return server;
    }
  }
}

export default function pyspawn(pi: ExtensionAPI) {
  const palace = new Palace();
  let registered = false;

  pi.on("session_start", async () => {
    if (registered) return;
    try {
      await palace.ready();
    } catch (error) {
      console.error(`pyspawn: ${(error as Error).message}; continuing without palace tools`);
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
