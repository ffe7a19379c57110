/**
 * Bounded connect retries for the remote palace (HTTP-02): after the last one the client gives up
 * for good, prints the seed's line and runs without palace tools; never a local fallback (LIFE-02).
 */
import { exponentialDelayMs } from "../../seed-policy/backoff.ts";

export const UNAVAILABLE_LINE = "mempalace-mcp unavailable after retries; continuing without palace tools";

export class ConnectRetries {
  readonly retries: number;
  readonly backoffMs: number;
  failures = 0;
  lastFailure = "";

  constructor(retries: number, backoffMs: number) {
    if (retries < 0 || backoffMs < 0) throw new RangeError("retries and backoffMs must be >= 0");
    this.retries = retries;
    this.backoffMs = backoffMs;
  }

  /** Record a failed try: the delay before the next one, or undefined when spent. */
  onFailure(why: string): number | undefined {
    this.failures += 1;
    this.lastFailure = why;
    if (this.failures > this.retries) return undefined;
    return exponentialDelayMs(this.backoffMs, this.failures);
  }
}
