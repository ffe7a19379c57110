/**
 * "A request just left": a one-shot signal a caller can wait on without waiting for the answer.
 * The agent_settled handler uses it so the mailbox poll it starts in the background is on the wire
 * before the handler returns (the host then sees the poll in that event's window, as pi's own
 * handlers see the fetch begun), while the answer is never awaited (MAIL-05, LIFE-06).
 */
export class DispatchSignal {
  private waiters: Array<() => void> = [];

  /** Resolves at the next request handed to the wire. */
  next(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** A request was handed to the wire (stdin written, fetch called). */
  fire(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}
