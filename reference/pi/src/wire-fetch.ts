/**
 * The fetch pi-mcp's Streamable HTTP transport is given: Node's own, with three of the seed copy's
 * wire decisions pi-mcp would otherwise make differently (the golden traces hold the palace to them).
 *
 * - A session whose opening failed is still held until shutdown, as the Python copy holds it:
 *   pi-mcp's `connect` closes the transport when `initialized` fails and DELETEs the session at
 *   once; until the opening succeeded, that DELETE is kept back (`held`) and `release()` sends it
 *   at shutdown (LIFE-06).
 * - A GET resuming a response stream (`Last-Event-ID`) answered with anything but a 2xx fails the
 *   call at once (the server cannot replay); pi-mcp would retry a 5xx up to five times.
 * - A notification already sent (a cancel after a timeout) gets its POST finished before the
 *   transport closes: `settle()` waits for them, at most `SETTLE_MS`.
 */

/** How long `settle()` waits for notifications still on the wire (the Python copy's close wait). */
export const SETTLE_MS = 1000;

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Raised for a resuming GET the server did not serve: pi-mcp treats it as final, not transient. */
export class ResumeRefused extends Error {}

function header(init: RequestInit | undefined, name: string): string | undefined {
  const headers = new Headers(init?.headers);
  return headers.get(name) ?? undefined;
}

function isNotification(body: unknown): boolean {
  if (typeof body !== "string") return false;
  try {
    const message: unknown = JSON.parse(body);
    return typeof message === "object" && message !== null && !("id" in message) && "method" in message;
  } catch {
    return false;
  }
}

export class WireFetch {
  /** Set once the session's opening succeeded: from then on a close may DELETE it. */
  opened = false;
  /** The DELETE a failed opening's close asked for, sent by `release()` at shutdown. */
  held?: { input: string | URL | Request; init: RequestInit };
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly base: Fetch;

  constructor(base: Fetch = (input, init) => fetch(input, init)) {
    this.base = base;
  }

  readonly fetch: Fetch = async (input, init) => {
    const method = (init?.method ?? "GET").toUpperCase();
    if (method === "DELETE" && !this.opened) {
      this.held = { input, init: { ...init } };
      return new Response(null, { status: 204 });
    }
    const sent = this.base(input, init);
    if (method === "POST" && isNotification(init?.body)) {
      const tracked = sent.then((response) => response, () => undefined);
      this.inflight.add(tracked);
      void tracked.finally(() => this.inflight.delete(tracked));
    }
    const response = await sent;
    if (method === "GET" && header(init, "last-event-id") !== undefined && (response.status < 200 || response.status > 299)) {
      await response.body?.cancel().catch(() => undefined);
      throw new ResumeRefused(`resuming GET with Last-Event-ID answered ${response.status}; the server cannot replay`);
    }
    return response;
  };

  /** Send the DELETE a failed opening kept back (best effort, at most `SETTLE_MS`). */
  async release(): Promise<void> {
    const held = this.held;
    this.held = undefined;
    if (!held) return;
    try {
      const response = await this.base(held.input, { ...held.init, signal: AbortSignal.timeout(SETTLE_MS) });
      await response.body?.cancel().catch(() => undefined);
    } catch {
      // best effort: the session expires on the server anyway
    }
  }

  /** Wait for the notifications still on the wire, at most `ms`. */
  async settle(ms: number = SETTLE_MS): Promise<void> {
    if (this.inflight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const cap = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
      timer.unref();
    });
    await Promise.race([Promise.allSettled([...this.inflight]), cap]);
    clearTimeout(timer);
  }
}
