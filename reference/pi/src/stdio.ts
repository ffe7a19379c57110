/**
 * One local `mempalace-mcp` child: spawn, line framing, correlation, stderr drain, clean death.
 *
 * The child leads its own process group, so a kill reaches whatever it started (no orphans). Its
 * stderr is always read, so a chatty server never blocks (STDIO-11); the text is forwarded only in
 * debug mode, through a SplitSecretGuard. A line that is not JSON-RPC is logged and dropped
 * (STDIO-13). When stdout closes, every in-flight request fails at once (STDIO-12). Policy (when to
 * kill, whether to respawn) lives in respawn.ts and local.ts: this class does what it is told.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, join, sep } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { dropPipesAfterDrain, ExitWaiters } from "../../seed-policy/child-exit.ts";
import { timerMs } from "./clock.ts";
import type { Deadline } from "./deadline.ts";
import { PalaceConnectionClosed, PalaceTimeout, PalaceUnavailable, SplitSecretGuard } from "./errors.ts";
import * as rpc from "./jsonrpc.ts";
import type { Log } from "./log.ts";

/** After stdout's end, how long to wait for an exit code worth reporting. */
const EXIT_CODE_WAIT_MS = 100;
/** After SIGKILL, how long to wait for the exit. */
const AFTER_KILL_MS = 2000;
/** After the exit, how long our readers may take to reach EOF before the pipes are abandoned. */
const DRAIN_MS = 1000;

/** The server binary cannot be run at all (not on PATH, not executable). */
export class Unspawnable extends PalaceUnavailable {}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** The executable for `command`, looked up on the given environment's PATH (LIFE-01). */
export function resolveCommand(command: string, env: Readonly<Record<string, string | undefined>>): string {
  if (command.includes(sep)) {
    if (isExecutableFile(command)) return command;
    throw new Unspawnable(`${command} is not an executable file`);
  }
  for (const dir of (env.PATH ?? "/usr/local/bin:/usr/bin:/bin").split(delimiter)) {
    const candidate = join(dir || ".", command);
    if (isExecutableFile(candidate)) return candidate;
  }
  throw new Unspawnable(`${command} not found on PATH`);
}

interface Pending {
  method: string;
  resolve: (message: Extract<rpc.Message, { kind: "response" }>) => void;
  reject: (error: Error) => void;
}

export class StdioConnection {
  readonly argv: string[];
  private readonly env: Record<string, string>;
  private readonly nextId: () => number;
  private readonly log: Log;
  private readonly onResult: () => void;
  private readonly onWrite: () => void;
  private child?: ChildProcessWithoutNullStreams;
  private readonly pending = new Map<string, Pending>();
  private closed = false;
  closedReason?: string;
  private exitCode: number | null = null;
  private exitedFlag = false;
  private readonly exitWaiters = new ExitWaiters();
  private stdoutEnded = false;
  private stderrEnded = false;
  private ending?: Promise<void>;

  constructor(argv: string[], env: Record<string, string>, nextId: () => number, log: Log, onResult: () => void,
    onWrite: () => void = () => undefined) {
    this.argv = argv;
    this.env = env;
    this.nextId = nextId;
    this.log = log;
    this.onResult = onResult;
    this.onWrite = onWrite;
  }

  spawn(): void {
    const executable = resolveCommand(this.argv[0] ?? "", this.env);
    let child: ChildProcessWithoutNullStreams;
    try {
      child = spawn(executable, this.argv.slice(1), { env: this.env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    } catch (error) {
      throw new Unspawnable(`cannot run ${executable}: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (child.pid === undefined) {
      // exec refused the file (ENOENT from a #! naming no interpreter, EACCES): Node reports it
      // only in a later "error" event, so say it now, as the Python seed's spawn does (STDIO-10)
      child.on("error", () => undefined);
      throw new Unspawnable(`cannot run ${executable}: exec refused it`);
    }
    this.child = child;
    child.on("error", (error) => this.closeSession(`cannot run ${executable}: ${error.message}`));
    child.on("exit", (code, signal) => {
      this.exitCode = code ?? (signal ? 128 : null);
      this.exitedFlag = true;
      this.exitWaiters.wakeAll();
      // a grandchild may hold stdout open: the session still ends, DRAIN_MS after the exit
      setTimeout(() => this.closeSession(this.exitReason()), DRAIN_MS).unref();
    });
    child.stdin.on("error", (error) => this.closeSession(`mempalace-mcp stdin closed (${error.message})`));
    this.readStdout(child);
    this.drainStderr(child);
    this.log.debug(`spawned ${this.argv[0]} pid ${child.pid}`);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Usable for requests: spawned and stdout still open. */
  get alive(): boolean {
    return this.child !== undefined && !this.closed;
  }

  get exited(): boolean {
    return this.child === undefined || this.exitedFlag;
  }

  request(method: string, params: Record<string, unknown> | undefined, deadline: Deadline): Promise<Extract<rpc.Message, { kind: "response" }>> {
    if (!this.alive) return Promise.reject(new PalaceConnectionClosed(this.closedReason ?? "mempalace-mcp is not running"));
    const id = this.nextId();
    const key = rpc.idKey(id) as string;
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = () => {
        if (timer) clearTimeout(timer);
        this.pending.delete(key);
      };
      this.pending.set(key, {
        method,
        resolve: (message) => { settle(); resolve(message); },
        reject: (error) => { settle(); reject(error); },
      });
      const left = deadline.remainingMs();
      if (left !== undefined) {
        timer = setTimeout(() => {
          settle();
          if (method !== "initialize") {
            // MCP: tell the server we stopped waiting; never for initialize
            this.sendSoon(rpc.notification("notifications/cancelled", { requestId: id, reason: "Request timed out" }));
          }
          reject(new PalaceTimeout(method, deadline.timeoutMs));
        }, timerMs(left));
      }
      this.write(rpc.request(id, method, params));
      this.onWrite();
    });
  }

  notify(method: string, params?: Record<string, unknown>): void {
    if (!this.alive) throw new PalaceConnectionClosed(this.closedReason ?? "mempalace-mcp is not running");
    this.write(rpc.notification(method, params));
  }

  private write(message: unknown): void {
    const child = this.child;
    if (!child || this.closed || !child.stdin.writable) {
      this.closeSession(this.closedReason ?? "mempalace-mcp stdin closed");
      return;
    }
    child.stdin.write(rpc.encode(message));
  }

  private sendSoon(message: unknown): void {
    if (this.alive) this.write(message);
  }

  private readStdout(child: ChildProcessWithoutNullStreams): void {
    const decoder = new rpc.LineDecoder();
    child.stdout.on("data", (chunk: Buffer) => {
      let lines: string[];
      try {
        lines = decoder.feed(chunk);
      } catch (error) {
        const reason = `mempalace-mcp sent an oversized message: ${(error as Error).message}`;
        this.log.line(`mempalace: ${reason}; restarting the server`);
        this.closeSession(reason);
        child.stdout.destroy();
        return;
      }
      for (const line of lines) this.dispatch(rpc.parse(line));
    });
    child.stdout.on("end", () => {
      this.stdoutEnded = true;
      if (decoder.pending) this.log.debug(`dropping ${decoder.pending} bytes of an unterminated last line`);
      void this.waitExit(EXIT_CODE_WAIT_MS).then(() => this.closeSession(this.exitReason()));
    });
    child.stdout.on("error", () => this.closeSession("reading mempalace-mcp stdout failed"));
  }

  private exitReason(): string {
    return this.exitCode !== null ? `mempalace-mcp exited with code ${this.exitCode}` : "mempalace-mcp closed its stdout";
  }

  private dispatch(message: rpc.Message): void {
    switch (message.kind) {
      case "response": {
        const key = rpc.idKey(message.id);
        const pending = key === undefined ? undefined : this.pending.get(key);
        if (!pending) {
          this.log.debug(`ignoring a response for unknown id ${JSON.stringify(message.id)}`);
          return;
        }
        if (!message.error) this.onResult();
        pending.resolve(message);
        return;
      }
      case "request":
        this.sendSoon(rpc.answerServerRequest(message.id, message.method));
        return;
      case "notification":
        this.log.debug(`notification ${message.method}`);
        return;
      case "invalid":
        this.log.debug(`dropping a malformed line from mempalace-mcp (${message.reason}): ${message.raw.slice(0, 120)}`);
    }
  }

  private drainStderr(child: ChildProcessWithoutNullStreams): void {
    const decoder = new StringDecoder("utf8");
    const guard = new SplitSecretGuard(this.log.secrets);
    child.stderr.on("data", (chunk: Buffer) => this.log.raw(guard.feed(decoder.write(chunk))));
    child.stderr.on("end", () => {
      this.stderrEnded = true;
      this.log.raw(guard.feed(decoder.end()) + guard.flush());
    });
    child.stderr.on("error", () => undefined);
  }

  /** No more requests on this child: fail every in-flight one now (STDIO-12). */
  private closeSession(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.closedReason = reason;
    this.log.debug(`connection closed: ${reason}`);
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const entry of pending) entry.reject(new PalaceConnectionClosed(reason));
  }

  private signalGroup(signal: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // already gone
    }
  }

  /** Whether the child exited within `timeoutMs`. */
  private waitExit(timeoutMs: number): Promise<boolean> {
    return this.exitWaiters.wait(timeoutMs, () => this.exited);
  }

  /** SIGTERM the group, SIGKILL after `graceMs` if still alive, then reap. Idempotent. */
  terminate(graceMs: number, reason = "killed"): Promise<void> {
    this.ending ??= this.doTerminate(graceMs, reason);
    return this.ending;
  }

  /** Polite stop (MCP stdio shutdown): close stdin, wait `graceMs`, then SIGTERM, then SIGKILL. */
  close(graceMs: number): Promise<void> {
    this.ending ??= this.doClose(graceMs);
    return this.ending;
  }

  private async doTerminate(graceMs: number, reason: string): Promise<void> {
    if (!this.child) return;
    this.closeSession(this.closedReason ?? reason);
    if (!this.exited) {
      // a zero grace is no time to act on SIGTERM: SIGKILL at once
      if (graceMs > 0) this.signalGroup("SIGTERM");
      if (graceMs <= 0 || !(await this.waitExit(graceMs))) {
        this.log.debug(`pid ${this.child.pid} ignored SIGTERM; sending SIGKILL`);
        this.signalGroup("SIGKILL");
        await this.waitExit(AFTER_KILL_MS);
      }
    }
    await this.finish();
  }

  private async doClose(graceMs: number): Promise<void> {
    if (!this.child) return;
    try {
      this.child.stdin.end();
    } catch {
      // already closed
    }
    if (!(await this.waitExit(graceMs))) {
      await this.doTerminate(graceMs, "stopped");
      return;
    }
    this.closeSession(this.closedReason ?? "stopped");
    await this.finish();
  }

  /** After the leader exited: sweep its group, give the readers a moment, then drop the pipes. */
  private async finish(): Promise<void> {
    this.signalGroup("SIGKILL");
    await dropPipesAfterDrain(this.child, () => this.stdoutEnded && this.stderrEnded, DRAIN_MS);
  }

  /** Last resort when the process is exiting: SIGKILL the group without waiting. */
  killNow(): void {
    if (!this.exited) this.signalGroup("SIGKILL");
  }
}
