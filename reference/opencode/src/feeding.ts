// Feeding (FEED-*) on the OpenCode copy: the shared policy (reference/seed-policy/feeding.ts) bound
// to this copy's palace client, the SDK's result type and its errors; the exec is the copy's own
// (src/exec.ts). Triggers: the instance's end (`dispose`, pi's session_shutdown) and the bus event
// `session.idle` (pi's agent_settled), wired in mempalace.ts.

import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

import { type Exec, Feeder as SeedFeeder, type FeedSettings } from "../../seed-policy/feeding.ts";
import type { Stamper } from "../../seed-policy/provenance.ts";
import { PalaceToolError, why } from "./errors.ts";
import { failed, resultText } from "./results.ts";

export { type FeedSettings, mineSource, type Outcome, SETTLED, SHUTDOWN, succeeded } from "../../seed-policy/feeding.ts";

/** The palace as the feeder calls it: one tool call under a timeout (undefined: the request timeout). */
export type FeedCaller = (name: string, args: Record<string, unknown>, timeoutMs: number | undefined) => Promise<CallToolResult>;

export class Feeder extends SeedFeeder<CallToolResult> {
  constructor(settings: FeedSettings, exec: Exec, caller: FeedCaller, stamper: Stamper, now: () => number, stderr: (line: string) => void) {
    super(settings, exec, {
      call: caller,
      failed,
      text: resultText,
      toolErrorCode: (error) => (error instanceof PalaceToolError ? error.code : undefined),
      describe: why,
    }, stamper, now, stderr);
  }
}
