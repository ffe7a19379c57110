import { timerMs } from "../../seed-policy/timer.ts";

export { TIMER_MAX_MS, timerMs } from "../../seed-policy/timer.ts";

/** Time as the policy sees it: injectable, so budgets and backoff are tested without sleeping. */
export interface Clock {
  nowMs(): number;
  sleep(ms: number): Promise<void>;
}


export const SYSTEM_CLOCK: Clock = {
  nowMs: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, timerMs(ms))),
};
