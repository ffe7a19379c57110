/**
 * Automatic transcript feeding (FEED-*), shared by the TypeScript copies (each binds its palace
 * client, results and errors through `FeedPalace`, and its host's exec): the palace is single-writer and this bridge's own client
 * holds it, so `$MEMPALACE_FEED_BIN --prepare` does every palace-free step and prints
 * `MINE_SOURCE=<path>`, then mempalace_mine runs through our own client. Triggers: session_shutdown
 * (always) and agent_settled (at most once per debounce window); overlapping triggers join one
 * in-flight feed. The window is charged only by a feed that succeeded (mined, or nothing to mine):
 * a refused or failed feed leaves it open so the next trigger tries again (no lost data).
 */
import type { Stamper } from "./provenance.ts";
import { timerMs } from "./timer.ts";

/**
 * What feeding needs of a copy's palace client, its result type `R` and its error classes (ADR-044:
 * the copies differ in client library and errors; the policy here does not).
 */
export interface FeedPalace<R> {
  /** One tool call under a timeout (undefined: the request timeout). */
  call(name: string, args: Record<string, unknown>, timeoutMs: number | undefined): Promise<R>;
  /** The result is a tool error (MCP `isError`). */
  failed(result: R): boolean;
  /** The result's text, for the one stderr line when it did not file the export. */
  text(result: R): string;
  /** The palace's JSON-RPC error code, when `error` is the palace's own tool error. */
  toolErrorCode(error: unknown): number | undefined;
  /** One line for an error. */
  describe(error: unknown): string;
}

export const SHUTDOWN = "session_shutdown";
export const SETTLED = "agent_settled";
const MINE_PREFIX = "MINE_SOURCE=";
const PEER_WRITER = -32001;
/** Slack over the mine timeout, in case the client does not enforce it. */
const MINE_GUARD_MS = 2000;

export type Outcome = "mined" | "nothing" | "prepare_failed" | "prepare_timeout" | "mine_refused" | "mine_failed";
export const succeeded = (outcome: Outcome): boolean => outcome === "mined" || outcome === "nothing";

export interface ExecResult {
  stdout: string;
  stderr: string;
  code: number;
  killed: boolean;
}

export type Exec = (command: string, args: string[], timeoutMs: number | undefined) => Promise<ExecResult>;

export interface FeedSettings {
  enabled: boolean;
  bin: string;
  wing: string;
  debounceMs: number;
  prepareTimeoutMs: number;
  mineTimeoutMs: number;
  remote: boolean;
  sshTarget?: string;
}

/** The path from the last `MINE_SOURCE=<path>` line, or undefined (nothing to feed). */
export function mineSource(stdout: string): string | undefined {
  let found: string | undefined;
  for (const raw of stdout.split(/\r?\n/)) {
    const line = raw.trim();
    if (line.startsWith(MINE_PREFIX) && line.slice(MINE_PREFIX.length).trim()) found = line.slice(MINE_PREFIX.length).trim();
  }
  return found;
}

const oneLine = (text: string): string => text.split(/\s+/).filter(Boolean).join(" ");

export class Feeder<R> {
  private readonly settings: FeedSettings;
  private readonly exec: Exec;
  private readonly palace: FeedPalace<R>;
  private readonly stamper: Stamper;
  private readonly now: () => number;
  private readonly stderr: (line: string) => void;
  private inflight?: Promise<Outcome>;
  private lastFed?: number;
  private closed = false;
  private skipReported = false;
  readonly outcomes: Outcome[] = [];

  constructor(settings: FeedSettings, exec: Exec, palace: FeedPalace<R>, stamper: Stamper, now: () => number, stderr: (line: string) => void) {
    this.settings = settings;
    this.exec = exec;
    this.palace = palace;
    this.stamper = stamper;
    this.now = now;
    this.stderr = stderr;
  }

  private mayFeed(): boolean {
    if (!this.settings.enabled || this.closed) return false;
    if (this.settings.remote && !this.settings.sshTarget) {
      if (!this.skipReported) {
        this.skipReported = true;
        this.stderr("mempalace: feed: skipped: a remote palace cannot read this machine's transcripts; set MEMPALACE_PI_SSH_TARGET to feed");
      }
      return false;
    }
    return true;
  }

  /** agent_settled: the feed it starts, or undefined (disabled, within the window, or joining one). */
  settled(): Promise<Outcome> | undefined {
    if (!this.mayFeed() || this.inflight) return undefined;
    if (this.lastFed !== undefined && this.now() - this.lastFed < this.settings.debounceMs) return undefined;
    return this.start(SETTLED);
  }

  /** session_shutdown: feed (joining one in flight) and wait for it; then stop feeding. */
  async shutdown(): Promise<Outcome | undefined> {
    if (!this.mayFeed()) {
      this.closed = true;
      return undefined;
    }
    const feed = this.inflight ?? this.start(SHUTDOWN);
    this.closed = true;
    return feed;
  }

  private start(reason: string): Promise<Outcome> {
    const started = this.now();
    const feed = this.prepareAndMine(reason).then((outcome) => {
      this.outcomes.push(outcome);
      if (succeeded(outcome)) this.lastFed = started;
      return outcome;
    }).finally(() => {
      if (this.inflight === feed) this.inflight = undefined;
    });
    this.inflight = feed;
    return feed;
  }

  private async prepareAndMine(reason: string): Promise<Outcome> {
    const { bin, wing, prepareTimeoutMs } = this.settings;
    let result: ExecResult;
    try {
      result = await this.exec(bin, ["--prepare", "--reason", reason, "--wing", wing], prepareTimeoutMs || undefined);
    } catch (error) {
      this.stderr(`mempalace: feed: could not run ${bin}: ${this.palace.describe(error)}`);
      return "prepare_failed";
    }
    if (result.killed) {
      this.stderr(`mempalace: feed: ${bin} --prepare killed after ${prepareTimeoutMs} ms; nothing mined this time`);
      return "prepare_timeout";
    }
    if (result.code !== 0) {
      const detail = oneLine(result.stderr).slice(0, 200);
      this.stderr(`mempalace: feed: ${bin} --prepare exited ${result.code}; nothing mined${detail ? `: ${detail}` : ""}`);
      return "prepare_failed";
    }
    const source = mineSource(result.stdout);
    return source === undefined ? "nothing" : this.mine(source);
  }

  private async mine(source: string): Promise<Outcome> {
    const args = this.stamper.stamp("mempalace_mine", { source, wing: this.settings.wing });
    const timeoutMs = this.settings.mineTimeoutMs || undefined;
    let result: R;
    try {
      const call = this.palace.call("mempalace_mine", args, timeoutMs);
      result = timeoutMs === undefined ? await call : await withGuard(call, timeoutMs + MINE_GUARD_MS);
    } catch (error) {
      if (this.palace.toolErrorCode(error) === PEER_WRITER) {
        this.stderr("mempalace: feed: mempalace_mine refused: another writer holds the palace (-32001); the next trigger will export and mine again");
        return "mine_refused";
      }
      const why = error instanceof GuardExpired ? `no answer in ${timeoutMs} ms` : this.palace.describe(error);
      this.stderr(`mempalace: feed: mempalace_mine failed: ${why}; the next trigger will try again`);
      return "mine_failed";
    }
    if (this.palace.failed(result)) {
      this.stderr(`mempalace: feed: mempalace_mine did not file the export: ${oneLine(this.palace.text(result)).slice(0, 200)}`);
      return "mine_failed";
    }
    return "mined";
  }
}

class GuardExpired extends Error {}

function withGuard<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    // a huge cap (MEMPALACE_FEED_MINE_TIMEOUT_MS=2147483647) plus the slack would overflow the
    // timer, which would then abandon the mine at once: a long guard is clamped, never wrapped
    timer = setTimeout(() => reject(new GuardExpired()), timerMs(ms));
  });
  return Promise.race([work, guard]).finally(() => clearTimeout(timer));
}
