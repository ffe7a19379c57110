/**
 * The remote session's renewal rule as plain code (no I/O): which session a call used, and what a
 * 404 on it means (HTTP-04, ADR-044). pi-mcp raises McpSessionExpiredError only for a 404 on a
 * request that carried a session id; a 404 without one is an HTTP error (a wrong URL).
 *
 * - first 404 on the current session: forget it, initialize afresh, retry the call once;
 * - first 404 on a session someone already replaced: retry once on the current one, no new init;
 * - 404 again on the retry: the call fails (session lost), no loop.
 */
export type SessionVerdict = "renew-and-retry" | "retry-on-current" | "session-lost";

export class SessionGenerations {
  /** Bumps on every completed initialize. */
  generation = 0;
  /** No session yet, or the last one was forgotten. */
  needsInit = true;

  onInitialized(): number {
    this.generation += 1;
    this.needsInit = false;
    return this.generation;
  }

  /** A call that used session `used` got a 404; `attempt` is 0 for the first try. */
  onNotFound(used: number, attempt: number): SessionVerdict {
    if (attempt >= 1) {
      this.forget(used);
      return "session-lost";
    }
    if (used !== this.generation) return "retry-on-current";
    this.forget(used);
    return "renew-and-retry";
  }

  /** A keep-alive ping on session `used` got a 404: replace it before the next call. */
  onPingNotFound(used: number): boolean {
    if (used !== this.generation || this.needsInit) return false;
    this.forget(used);
    return true;
  }

  private forget(used: number): void {
    if (used === this.generation) this.needsInit = true;
  }
}
