/**
 * The auto-delivered mailbox (MAIL-*), shared by the TypeScript copies (each binds its palace
 * client and result type through `MailPalace`, and steers the mail into its host's session): what
 * this device owes, derived from the event log, as the Python reference's features/mailbox.py.
 * Owed-ness is derived, never read off a field: event_ack appends and status is written once, so a
 * directed open event stays open in the log forever, answered or not; it is owed while none of my
 * later events closes it (ack_of or correlation, terminal status). `owed` is the whole rule as a
 * pure function; Mailbox fetches, formats and hands out each item once per session, fail-silent.
 */
import { isRecord } from "./config.ts";

export const TERMINAL = new Set(["applied", "superseded", "failed", "blocked"]);
export const MAILBOX_TYPE = "mempalace-mailbox";
const LIST_TOOL = "mempalace_event_list";
const FETCH_LIMIT = 200; // per call; the server's default (50) is easily outgrown by own replies
const BODY_PREVIEW = 400;

export type PalaceEvent = Record<string, unknown> & { id: string };

/** What the mailbox needs of a copy's palace client and its result type `R` (as `FeedPalace`). */
export interface MailPalace<R> {
  /** One tool call under the request timeout. */
  call(name: string, args: Record<string, unknown>): Promise<R>;
  /** The result did not do its job (isError, `{"success": false}`, ...). */
  failed(result: R): boolean;
  /** The result's text (the event list's JSON). */
  text(result: R): string;
}

const seqOf = (event: Record<string, unknown>): number | undefined =>
  typeof event["seq"] === "number" && Number.isInteger(event["seq"]) ? event["seq"] : undefined;
const textOf = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);

function answers(reply: Record<string, unknown>, ask: Record<string, unknown>): boolean {
  const replySeq = seqOf(reply);
  const askSeq = seqOf(ask);
  if (replySeq === undefined || askSeq === undefined || replySeq <= askSeq) return false;
  if (typeof reply["status"] !== "string" || !TERMINAL.has(reply["status"])) return false;
  const metadata = reply["metadata"];
  const ackOf = isRecord(metadata) ? metadata["ack_of"] : undefined;
  if (textOf(ackOf) !== undefined && ackOf === ask["id"]) return true;
  const correlation = textOf(ask["correlation_id"]);
  return correlation !== undefined && reply["correlation_id"] === correlation;
}

/**
 * Events addressed to `me` that are open and that none of my events has closed yet: closed by one
 * of mine with a strictly higher seq, joined by metadata.ack_of or a shared correlation_id, with a
 * terminal status. Broadcasts (`*`) never match `to_agent == me`. Ordered by seq then id, no duplicates.
 */
export function owed(me: string, inbox: readonly unknown[], mine: readonly unknown[]): PalaceEvent[] {
  const known = new Map<string, PalaceEvent>();
  for (const event of [...inbox, ...mine]) {
    if (!isRecord(event)) continue;
    const id = textOf(event["id"]);
    if (id !== undefined && !known.has(id)) known.set(id, event as PalaceEvent);
  }
  const events = [...known.values()];
  const replies = events.filter((e) => e["from_agent"] === me);
  const result = events.filter((e) => e["to_agent"] === me && e["status"] === "open" && !replies.some((r) => answers(r, e)));
  return result.sort((a, b) => {
    const sa = seqOf(a);
    const sb = seqOf(b);
    if ((sa === undefined) !== (sb === undefined)) return sa === undefined ? 1 : -1;
    if ((sa ?? 0) !== (sb ?? 0)) return (sa ?? 0) - (sb ?? 0);
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
}

const show = (value: unknown): string => (value === undefined || value === null ? "None" : String(value));

export function formatItems(me: string, items: readonly PalaceEvent[]): string {
  const lines = [`${items.length} event(s) addressed to ${me} are open with no terminal reply from you yet (reply with mempalace_event_append or mempalace_event_ack; only applied, superseded, failed or blocked closes a thread):`];
  for (const event of items) {
    const where = ["stream", "room"].filter((k) => event[k]).map((k) => String(event[k])).join("/");
    let head = `- ${event.id} (seq ${show(event["seq"])}) ${show(event["type"] || "event")} from ${show(event["from_agent"] || "?")}`;
    if (where) head += ` in ${where}`;
    if (event["correlation_id"]) head += `, correlation ${String(event["correlation_id"])}`;
    lines.push(head);
    const body = event["body"];
    if (typeof body === "string" && body.trim()) {
      let preview = body.trim();
      if (preview.length > BODY_PREVIEW) preview = `${preview.slice(0, BODY_PREVIEW)} [...]`;
      lines.push(`  ${preview.replace(/\n/g, "\n  ")}`);
    }
  }
  return lines.join("\n");
}

/** What a steered mailbox message carries beside its text (the Python copy's message `details`). */
export type MailDetails = {
  to_agent: string;
  event_ids: string[];
  events: unknown;
};

/** One poll's delivery: the text steered into the session and its details. */
export interface Mail {
  text: string;
  details: MailDetails;
}

/** Fetches the owed set and hands out each item once per session; every failure is silent. */
export class Mailbox<R> {
  readonly me: string;
  private readonly palace: MailPalace<R>;
  private readonly pollMs: number;
  private readonly now: () => number;
  private readonly delivered = new Set<string>();
  private lastPoll: number | undefined;

  constructor(palace: MailPalace<R>, me: string, pollMs: number, now: () => number) {
    this.palace = palace;
    this.me = me;
    this.pollMs = pollMs;
    this.now = now;
  }

  /** The current owed set, or undefined when the palace did not answer properly. */
  async fetch(): Promise<PalaceEvent[] | undefined> {
    this.lastPoll = this.now();
    let replies: R[];
    try {
      // both queries always go out (inbox, then my own events); the answers are judged together
      const inbox = await this.palace.call(LIST_TOOL, { to_agent: this.me, status: "open", limit: FETCH_LIMIT });
      const mine = await this.palace.call(LIST_TOOL, { writer: this.me, limit: FETCH_LIMIT });
      replies = [inbox, mine];
    } catch {
      return undefined;
    }
    const lists: unknown[][] = [];
    for (const result of replies) {
      let body: unknown;
      try {
        body = JSON.parse(this.palace.text(result));
      } catch {
        return undefined;
      }
      const events = isRecord(body) ? body["events"] : undefined;
      if (this.palace.failed(result) || !Array.isArray(events)) return undefined;
      lists.push(events);
    }
    return owed(this.me, lists[0] ?? [], lists[1] ?? []);
  }

  private undelivered(items: PalaceEvent[]): PalaceEvent[] {
    const fresh = items.filter((e) => !this.delivered.has(e.id));
    for (const e of fresh) this.delivered.add(e.id);
    return fresh;
  }

  /** The mailbox part of the wake-up text, or undefined (failed, nothing owed). */
  async wakeupSection(): Promise<string | undefined> {
    const items = await this.fetch();
    if (!items?.length) return undefined;
    const fresh = this.undelivered(items);
    return fresh.length ? formatItems(this.me, fresh) : undefined;
  }

  /** Whether the poll floor has passed since the last fetch (the wake-up's counts). */
  due(): boolean {
    return this.lastPoll === undefined || this.now() - this.lastPoll >= this.pollMs;
  }

  /** One poll when the session settles: the new owed items to steer in (no new turn), or
   * undefined (within the poll floor, failed, nothing new). */
  async nextMail(): Promise<Mail | undefined> {
    if (!this.due()) return undefined;
    const items = await this.fetch();
    if (!items?.length) return undefined;
    const fresh = this.undelivered(items);
    if (!fresh.length) return undefined;
    return {
      text: formatItems(this.me, fresh),
      details: { to_agent: this.me, event_ids: fresh.map((e) => e.id), events: JSON.parse(JSON.stringify(fresh)) as unknown },
    };
  }
}
