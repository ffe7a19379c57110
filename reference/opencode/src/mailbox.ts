// The auto-delivered mailbox (MAIL-*) on the OpenCode copy: the shared policy
// (reference/seed-policy/mailbox.ts: owed-ness, the text, once per session) bound to the SDK's
// result type; each poll's mail is steered into the session by the caller's sink, fail-silent.

import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { type MailDetails, Mailbox as SeedMailbox } from "../../seed-policy/mailbox.ts";
import { failed, resultText } from "./results.ts";
export { failed, resultText }; // one reading of a result in the copy: src/results.ts
export { formatItems, type MailDetails, MAILBOX_TYPE, owed, type PalaceEvent, TERMINAL } from "../../seed-policy/mailbox.ts";

export type CallTool = (name: string, args: Record<string, unknown>) => Promise<CallToolResult>;

/** Delivers a steer text (with its details) into the session without starting a turn. */
export type SteerSink = (text: string, details: MailDetails) => Promise<void>;

export class Mailbox extends SeedMailbox<CallToolResult> {
  constructor(callTool: CallTool, me: string, pollMs: number, now: () => number = Date.now) {
    super({ call: callTool, failed, text: resultText }, me, pollMs, now);
  }

  /** One poll when the session goes idle: new owed items steered into the thread, no new turn. */
  async poll(steer: SteerSink): Promise<void> {
    const mail = await this.nextMail();
    if (!mail) return;
    try {
      await steer(mail.text, mail.details);
    } catch {
      // fail-silent: a message OpenCode would not take is no turn's business
    }
  }
}
