// The local child's life as a state machine: tolerant first start, bounded respawn, the latch
// (STDIO-05..09). The same rules as reference/palace_bridge/respawn.py: a dead child is respawned
// on the next call, at most `maxRespawns` times, waiting `backoffMs` doubled per attempt; a
// completed handshake or any later successful response gives the budget back; once spent (or at
// once with `maxRespawns` 0) calls fail fast until restart. An unspawnable binary latches at once.

export type ChildState = "new" | "starting" | "ready" | "dead" | "latched" | "stopped";

export type Decision =
  | { kind: "spawn"; attempt: number; delayMs: number }
  | { kind: "use" }
  | { kind: "refuse"; why: string };

export class RespawnPolicy {
  state: ChildState = "new";
  used = 0;
  lastFailure = "";
  latchReason = "";

  readonly maxRespawns: number;
  readonly backoffMs: number;

  constructor(maxRespawns: number, backoffMs: number) {
    this.maxRespawns = maxRespawns;
    this.backoffMs = backoffMs;
  }

  wantChild(): Decision {
    switch (this.state) {
      case "ready":
        return { kind: "use" };
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
    return { kind: "spawn", attempt: this.used, delayMs: this.backoffMs * 2 ** (this.used - 1) };
  }

  onReady(): void {
    if (this.state === "starting") {
      this.state = "ready";
      this.used = 0;
    }
  }

  onStartFailed(why: string): void {
    if (this.state === "starting" || this.state === "ready") {
      this.state = "dead";
      this.lastFailure = why;
    }
  }

  onDeath(why: string): void {
    this.onStartFailed(why);
  }

  onUnspawnable(why: string): void {
    if (this.state !== "stopped") {
      this.lastFailure = why;
      this.latchReason = why;
      this.state = "latched";
    }
  }

  /** Any successful response from a ready child: the full budget is back (STDIO-07). */
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
