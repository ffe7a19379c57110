/**
 * A supervised palace child's end, as both TypeScript copies' stdio children need it: the kill
 * owed to every live child's group if the host exits without a stop (LIFE-06), and the waiters on
 * one child's exit. The spawn, the signals and the pipes stay in each copy (pi: src/stdio.ts,
 * OpenCode: src/stdio-transport.ts).
 */
import { timerMs } from "./timer.ts";

/** The live children's kills, run if the host exits while they are registered. */
const KILLS = new Map<object, () => void>();
let hooked = false;

/**
 * `kill` (a SIGKILL of `child`'s group, no waiting) runs if the host exits while `child` is
 * registered: a host that ends with no session shutdown (a crash, an abrupt end) must not leave
 * palace groups behind (LIFE-06). Registering `child` again replaces its kill.
 */
export function killAtHostExit(child: object, kill: () => void): void {
  if (!hooked) {
    hooked = true;
    process.once("exit", () => {
      for (const killNow of KILLS.values()) killNow();
    });
  }
  KILLS.set(child, kill);
}

/** `child` is gone or stopped by its own path: nothing is owed to it at the host's exit. */
export function spareAtHostExit(child: object): void {
  KILLS.delete(child);
}

/** Who waits on one child's exit: woken at once when it comes, else at the wait's end. */
export class ExitWaiters {
  private readonly waiters = new Set<() => void>();

  /** Whether `exited()` holds within `ms` (true at once when it holds already). */
  wait(ms: number, exited: () => boolean): Promise<boolean> {
    if (exited()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(wake);
        resolve(exited());
      }, timerMs(ms));
      this.waiters.add(wake);
    });
  }

  /** The child exited: every waiter wakes now. */
  wakeAll(): void {
    for (const wake of this.waiters) wake();
    this.waiters.clear();
  }
}

/** A child's pipes, as the copies' spawn gives them (Node's `ChildProcess` streams). */
export interface ChildPipes {
  stdin: { destroy(): unknown };
  stdout: { destroy(): unknown };
  stderr: { destroy(): unknown };
}

/**
 * After the leader exited and its group was swept: the pipes are read until both outputs end (a
 * helper that left the group may still write to stderr, STDIO-11), for at most `drainMs`, then
 * dropped, so a grandchild holding them open cannot keep the bridge waiting.
 */
export async function dropPipesAfterDrain(child: ChildPipes | undefined, ended: () => boolean, drainMs: number): Promise<void> {
  const started = Date.now();
  while (!ended() && Date.now() - started < drainMs) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  if (child) {
    child.stdin.destroy();
    child.stdout.destroy();
    child.stderr.destroy();
  }
}
