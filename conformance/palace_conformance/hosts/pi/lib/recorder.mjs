// Effects (DRIVER.md "Effects"): every host-visible thing a bridge did, in order.
//
// Each reply carries the effects recorded since the previous reply, so effects produced
// between ops (a tool registered after session_start returned) land in the next reply, and
// `settle` can wait for a bridge's background work to go quiet.

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const { performance } = process.getBuiltinModule("node:perf_hooks");

export class Recorder {
  constructor() {
    this.effects = [];
    this.reported = 0;
    this.lastAt = performance.now();
    this.listeners = new Set();
    this.pending = new Set();
  }

  /** Call `listener(effect)` for every effect recorded from now on; returns an unsubscribe. */
  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Background work `settle` should wait for (the promise is dropped once it settles). */
  track(promise) {
    this.pending.add(promise);
    promise.finally(() => this.pending.delete(promise)).catch(() => undefined);
  }

  /** Append one effect `{kind, ...fields}`. */
  record(kind, fields = {}) {
    const effect = { kind, ...fields };
    this.effects.push(effect);
    this.lastAt = performance.now();
    for (const listener of [...this.listeners]) {
      try {
        listener(effect);
      } catch {
        // a listener is the host's own bookkeeping; it must not break recording
      }
    }
  }

  /** Effects not yet reported, in order; marks them reported. */
  take() {
    const fresh = this.effects.slice(this.reported);
    this.reported = this.effects.length;
    return fresh;
  }

  /**
   * Resolve once tracked background work is done and no effect arrived for `quietMs` (counted
   * from the later of the last effect and the call), or after `maxMs` at most.
   */
  async settle(quietMs = 200, maxMs = 5000) {
    const started = performance.now();
    const deadline = started + maxMs;
    if (this.pending.size > 0) {
      let timer;
      await Promise.race([Promise.allSettled([...this.pending]),
        new Promise((resolve) => { timer = setTimeout(resolve, maxMs); })]);
      clearTimeout(timer);
    }
    for (;;) {
      const now = performance.now();
      const idle = now - Math.max(this.lastAt, started);
      if (idle >= quietMs || now >= deadline) return;
      const wait = Math.max(1, Math.min(quietMs - idle, deadline - now, 50));
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}
