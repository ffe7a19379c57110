/**
 * The local child's life as a state machine (no I/O): tolerant first start, bounded respawn, latch.
 *
 * Seed rules (Self-heal): a dead child is respawned on the next call, at most `maxRespawns` times,
 * waiting `backoffMs` doubled per attempt. Any successful JSON-RPC response resets the budget
 * (STDIO-07); a completed handshake counts as one. Once spent, or with `maxRespawns == 0` after
 * the first death, the state latches (STDIO-06/08). The first start runs the same bounded respawn
 * (STDIO-09). A binary that cannot be spawned at all latches at once.
 */
import { exponentialDelayMs } from "./backoff.ts";

export type ChildState = "new" | "starting" | "ready" | "dead" | "latched" | "stopped";

export type Decision =
  | { kind: "spawn"; attempt: number; delayMs: number }
  | { kind: "use-current" }
  | { kind: "refuse"; why: string };

export class RespawnPolicy {
  readonly maxRespawns: number;
  readonly backoffMs: number;
  state: ChildState = "new";
  used = 0;
  lastFailure = "";
  latchReason = "";

  constructor(maxRespawns: number, backoffMs: number) {
    if (maxRespawns < 0 || backoffMs < 0) throw new RangeError("maxRespawns and backoffMs must be >= 0");
    this.maxRespawns = maxRespawns;
    this.backoffMs = backoffMs;
  }

  /** A caller needs a ready child. */
  wantChild(): Decision {
    switch (this.state) {
      case "ready":
        return { kind: "use-current" };
      case "new":
        this.state = "starting";
        return { kind: "spawn", attempt: 0, delayMs: 0 };
      case "stopped":
        return { kind: "refuse", why: "the palace client was stopped" };
      case "latched":
        return { kind: "refuse", why: this.latchReason };
      case "starting":
        throw new Error("wantChild() while a start is in progress; serialise starts");
      case "dead":
        break;
    }
    if (this.used >= this.maxRespawns) {
      this.latch();
      return { kind: "refuse", why: this.latchReason };
    }
    this.used += 1;
    this.state = "starting";
    return { kind: "spawn", attempt: this.used, delayMs: exponentialDelayMs(this.backoffMs, this.used) };
  }

  /** The handshake finished on the child just spawned: the budget is back. */
  onReady(): void {
    if (this.state === "starting") {
      this.state = "ready";
      this.used = 0;
    }
  }

  /** The child just spawned exited, stalled past the init budget, or broke the handshake. */
  onStartFailed(why: string): void {
    if (this.state === "starting" || this.state === "ready") {
      this.state = "dead";
      this.lastFailure = why;
    }
  }

  /** A ready child crashed or was killed after a stall. */
  onDeath(why: string): void {
    this.onStartFailed(why);
  }

  /** The binary cannot be executed at all: latch now, waiting would not make it appear. */
  onUnspawnable(why: string): void {
    if (this.state !== "stopped") {
      this.lastFailure = why;
      this.latchReason = why;
      this.state = "latched";
    }
  }

  /** Any successful JSON-RPC response on a ready child: proof of life (STDIO-07). During a start
   * the reset waits for onReady: a child that answers initialize then dies has proved nothing. */
  onSuccess(): void {
    if (this.state === "ready") this.used = 0;
  }

  onStop(): void {
    this.state = "stopped";
  }

  private latch(): void {
    this.state = "latched";
    const last = this.lastFailure ? ` (last failure: ${this.lastFailure})` : "";
    this.latchReason = this.maxRespawns === 0
      ? `mempalace-mcp died and self-heal is off (MEMPALACE_MCP_MAX_RESPAWNS=0)${last}; restart to retry`
      : `mempalace-mcp respawn budget spent (${this.maxRespawns} attempt(s))${last}; restart to retry`;
  }
}
