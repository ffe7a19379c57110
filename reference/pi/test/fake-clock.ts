/** A clock the tests move by hand: sleeps resolve when `advance` passes their end. */
import type { Clock } from "../src/clock.ts";

export class FakeClock implements Clock {
  now = 0;
  private sleepers: Array<{ until: number; wake: () => void }> = [];

  nowMs(): number {
    return this.now;
  }

  sleep(ms: number): Promise<void> {
    return new Promise((wake) => this.sleepers.push({ until: this.now + ms, wake }));
  }

  advance(ms: number): void {
    this.now += ms;
    const due = this.sleepers.filter((s) => s.until <= this.now);
    this.sleepers = this.sleepers.filter((s) => s.until > this.now);
    for (const s of due) s.wake();
  }
}
