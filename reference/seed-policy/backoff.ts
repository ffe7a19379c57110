/** Capped exponential backoff, shared by the respawn budget and the connect retries. */
export function exponentialDelayMs(baseMs: number, attempt: number, capMs?: number): number {
  if (attempt < 1) throw new RangeError("attempts are numbered from 1");
  const delay = baseMs * 2 ** (attempt - 1);
  return capMs === undefined ? delay : Math.min(delay, capMs);
}
