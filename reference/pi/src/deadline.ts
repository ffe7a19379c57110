/**
 * Request deadlines: a per-request budget and a longer handshake budget, `0` meaning "wait
 * forever" (STDIO-04). The transports ask a Deadline how long they may still wait.
 * Progress notifications do not extend a deadline: a palace that drips progress forever is wedged.
 */
import type { Clock } from "./clock.ts";

export class Deadline {
  readonly clock: Clock;
  readonly startedMs: number;
  readonly timeoutMs: number;

  constructor(clock: Clock, timeoutMs: number) {
    if (timeoutMs < 0) throw new RangeError("timeoutMs must be >= 0 (0 disables the deadline)");
    this.clock = clock;
    this.timeoutMs = timeoutMs;
    this.startedMs = clock.nowMs();
  }

  get enabled(): boolean {
    return this.timeoutMs > 0;
  }

  /** Milliseconds left (never negative), or undefined when there is no deadline. */
  remainingMs(): number | undefined {
    if (!this.enabled) return undefined;
    return Math.max(0, this.startedMs + this.timeoutMs - this.clock.nowMs());
  }

  expired(): boolean {
    const left = this.remainingMs();
    return left !== undefined && left <= 0;
  }
}

/** Which budget a request gets: the handshake has its own, longer one (STDIO-03). */
export class TimeoutPolicy {
  readonly requestTimeoutMs: number;
  readonly initTimeoutMs: number;

  constructor(requestTimeoutMs: number, initTimeoutMs: number) {
    this.requestTimeoutMs = requestTimeoutMs;
    this.initTimeoutMs = initTimeoutMs;
  }

  forRequest(clock: Clock, overrideMs?: number): Deadline {
    return new Deadline(clock, overrideMs ?? this.requestTimeoutMs);
  }

  /** One budget for initialize + tools/list (every page) together. */
  forHandshake(clock: Clock): Deadline {
    return new Deadline(clock, this.initTimeoutMs);
  }
}
