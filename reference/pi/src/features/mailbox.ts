/**
 * The auto-delivered mailbox (MAIL-*) on the pi copy: the shared policy
 * (reference/seed-policy/mailbox.ts: owed-ness, the text, once per session) bound to this copy's
 * palace client and results; each agent_settled poll's mail is steered into the next turn.
 */
import { Mailbox as SeedMailbox, MAILBOX_TYPE } from "../../../seed-policy/mailbox.ts";
import type { PalaceCaller } from "../client.ts";
import type { Clock } from "../clock.ts";
import { failed, resultText, type ToolResult } from "../tools.ts";

export { formatItems, MAILBOX_TYPE, owed, type PalaceEvent, TERMINAL } from "../../../seed-policy/mailbox.ts";

export interface SteerSink {
  (customType: string, content: string, details: Record<string, unknown>): void;
}

export class Mailbox extends SeedMailbox<ToolResult> {
  private readonly steer: SteerSink;

  constructor(caller: PalaceCaller, me: string, pollMs: number, clock: Clock, steer: SteerSink) {
    super({ call: (name, args) => caller.callTool(name, args), failed, text: resultText }, me, pollMs, () => clock.nowMs());
    this.steer = steer;
  }

  /** One agent_settled poll: steer new owed items into the next turn, no new turn. */
  async poll(): Promise<void> {
    const mail = await this.nextMail();
    if (mail) this.steer(MAILBOX_TYPE, mail.text, mail.details);
  }
}
