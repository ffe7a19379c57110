/**
 * Wake-up injection (WAKE-*): the first before_agent_start after a session_start with reason
 * startup or new calls mempalace_status and mempalace_diary_read and injects one mempalace-wakeup
 * message holding both (plus the mailbox section when there is one). Resumed, forked or reloaded
 * sessions already have it in their thread. Any failure: no injection, nothing reaching the host.
 */
import type { PalaceCaller } from "../client.ts";
import { failed, resultText } from "../tools.ts";
import type { Mailbox } from "./mailbox.ts";

export const WAKEUP_TYPE = "mempalace-wakeup";
const FRESH_REASONS = new Set(["startup", "new"]);

export interface WakeupMessage {
  customType: string;
  content: string;
  display: boolean;
  details: Record<string, unknown>;
}

export class WakeUp {
  private readonly caller: PalaceCaller;
  private readonly agentName: string;
  private readonly mailbox?: Mailbox;
  armed = false;

  constructor(caller: PalaceCaller, agentName: string, mailbox?: Mailbox) {
    this.caller = caller;
    this.agentName = agentName;
    this.mailbox = mailbox;
  }

  sessionStart(reason: unknown): void {
    this.armed = typeof reason === "string" && FRESH_REASONS.has(reason);
  }

  async beforeAgentStart(): Promise<WakeupMessage | undefined> {
    if (!this.armed) return undefined;
    this.armed = false; // spent before any await: a second prompt never waits on the first
    let status;
    let diary;
    try {
      status = await this.caller.callTool("mempalace_status", {});
      diary = await this.caller.callTool("mempalace_diary_read", { agent_name: this.agentName });
    } catch {
      return undefined;
    }
    if (failed(status) || failed(diary)) return undefined;
    const mailbox = this.mailbox ? await this.mailbox.wakeupSection() : undefined;
    const parts = [
      "MemPalace wake-up: your long-term memory for this session. Orient yourself from the palace status and your recent diary below before you answer.",
      `## Palace status (mempalace_status)\n${resultText(status)}`,
      `## Your diary (mempalace_diary_read, agent_name=${this.agentName})\n${resultText(diary)}`,
    ];
    if (mailbox) parts.push(`## Mailbox\n${mailbox}`);
    return { customType: WAKEUP_TYPE, content: parts.join("\n\n"), display: true,
      details: { agent_name: this.agentName, mailbox: mailbox !== undefined } };
  }
}
