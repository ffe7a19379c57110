// The local child's transport: the SDK's `Transport` contract over a child spawned in a process
// group of its own, so the bridge can sweep the group (LIFE-06: no orphan outlives the child).
//
// The SDK's `StdioClientTransport` spawns the child in the host's group and has no option for
// another, so a grandchild the palace starts could never be reached without wrapping the command
// (`setsid`), which would turn a missing binary (ENOENT, STDIO-10) into an exit code. This class
// keeps the SDK's own line framing (`ReadBuffer`, `serializeMessage`) and the SDK's `Client` on
// top; it differs from `StdioClientTransport` only in the spawn (`detached`: a group of its own),
// in the sweep after the child's exit, and in reading stderr until it ends (a helper that left the
// group may still write there; STDIO-11), for at most DRAIN_MS after the sweep.

import { spawn } from "node:child_process";
import type { ChildProcessWithoutNullStreams } from "node:child_process";

import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { dropPipesAfterDrain, ExitWaiters, killAtHostExit, spareAtHostExit } from "../../seed-policy/child-exit.ts";

/** How long the pipes are read after the group was swept (docs/choices.md: 1 s, as the other copies). */
export const DRAIN_MS = 1000;

export class GroupStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private child: ChildProcessWithoutNullStreams | undefined;
  private readonly buffer = new ReadBuffer();
  private exitedFlag = false;
  private closed = false;
  private stdoutEnded = false;
  private stderrEnded = false;
  private readonly exitWaiters = new ExitWaiters();
  private readonly command: string;
  private readonly env: Record<string, string>;

  constructor(command: string, env: Record<string, string>) {
    this.command = command;
    this.env = env;
  }

  /** Told each time a message was written to the child's stdin. */
  onsend?: () => void;
  /** Gets every stderr chunk, then `null` at its end; set before `start` (stderr is always read: STDIO-11). */
  onstderr?: (chunk: Buffer | null) => void;

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  get exited(): boolean {
    return this.child === undefined || this.exitedFlag;
  }

  start(): Promise<void> {
    if (this.child) return Promise.reject(new Error("the palace transport is already started"));
    return new Promise((resolve, reject) => {
      const child = spawn(this.command, [], { env: this.env, stdio: ["pipe", "pipe", "pipe"], detached: true });
      this.child = child;
      if (child.pid !== undefined) {
        // the group is killed if the host ends without a stop (LIFE-06), until the child exits
        killAtHostExit(this, () => this.signalGroup("SIGKILL"));
      }
      child.on("error", (error) => {
        // a program that cannot start keeps its errno code (ENOENT, EACCES) for the caller
        reject(error);
        this.onerror?.(error);
        setImmediate(() => this.finishClose()); // after the start's rejection has reached the caller
      });
      child.on("spawn", () => resolve());
      child.on("exit", () => {
        spareAtHostExit(this);
        this.exitedFlag = true;
        this.exitWaiters.wakeAll();
        // the leader is gone: sweep what it left in its group, read the pipes a moment, then close
        void this.sweepAndClose();
      });
      child.stdin.on("error", (error) => this.onerror?.(error));
      child.stdout.on("data", (chunk: Buffer) => {
        try {
          this.buffer.append(chunk);
        } catch (error) {
          this.onerror?.(error as Error);
          return;
        }
        this.readMessages();
      });
      child.stdout.on("end", () => { this.stdoutEnded = true; });
      child.stdout.on("error", (error) => this.onerror?.(error));
      child.stderr.on("data", (chunk: Buffer) => this.onstderr?.(chunk));
      child.stderr.on("end", () => {
        this.stderrEnded = true;
        this.onstderr?.(null);
      });
      child.stderr.on("error", () => undefined);
    });
  }

  /** Every whole line on stdout; a line that is not a JSON-RPC message is dropped with an onerror (STDIO-13). */
  private readMessages(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (error) {
        this.onerror?.(error as Error);
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin;
      if (!stdin || this.closed || this.exitedFlag) {
        reject(new Error("Not connected"));
        return;
      }
      const flushed = stdin.write(serializeMessage(message));
      this.onsend?.();
      if (flushed) resolve();
      else stdin.once("drain", () => resolve());
    });
  }

  /** Signal the child's whole group (it leads one: spawned detached). */
  signalGroup(name: NodeJS.Signals): void {
    const pid = this.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, name);
    } catch {
      // the group is gone already
    }
  }

  /** Whether the child exited within `ms`. */
  waitExit(ms: number): Promise<boolean> {
    return this.exitWaiters.wait(ms, () => this.exited);
  }

  /** Close stdin (MCP's polite stop); the caller decides how long to wait and when to signal. */
  endInput(): void {
    try {
      this.child?.stdin.end();
    } catch {
      // already closed
    }
  }

  /** The SDK's close: end stdin; the group is swept when the child exits (see `terminate` for the signals). */
  async close(): Promise<void> {
    this.endInput();
    if (this.exited) await this.sweepAndClose();
  }

  private sweeping: Promise<void> | undefined;

  private sweepAndClose(): Promise<void> {
    this.sweeping ??= (async () => {
      this.signalGroup("SIGKILL");
      await dropPipesAfterDrain(this.child, () => this.stdoutEnded && this.stderrEnded, DRAIN_MS);
      this.finishClose();
    })();
    return this.sweeping;
  }

  private finishClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    this.onclose?.();
  }
}
