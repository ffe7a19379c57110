/** Time as the policy sees it: injectable, so budgets and backoff are tested without sleeping. */
export interface Clock {
  nowMs(): number;
  sleep(ms: number): Promise<void>;
}

export const SYSTEM_CLOCK: Clock = {
  nowMs: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms))),
};
