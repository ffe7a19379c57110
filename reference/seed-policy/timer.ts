// Delays as a Node timer can hold them (both TypeScript copies).

/** The longest delay a Node timer holds (2^31-1 ms, about 24.8 days). */
export const TIMER_MAX_MS = 2 ** 31 - 1;

/**
 * `ms` as a Node timer can hold it. A knob may be any non-negative integer, but `setTimeout` (and
 * each client library's request timeout built on it) fires a delay past 2^31-1 ms at once, with a
 * TimeoutOverflowWarning: a huge wait, timeout or grace would end at once instead of lasting.
 * Past the cap it waits the cap, a long bound, never an overflow.
 */
export function timerMs(ms: number): number {
  return Math.min(Math.max(0, ms), TIMER_MAX_MS);
}
