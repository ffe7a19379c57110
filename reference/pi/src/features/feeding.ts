/**
 * Feeding (FEED-*) on the pi copy: the shared policy (reference/seed-policy/feeding.ts) bound to
 * this copy's palace client, its results and its errors; the exec is pi's (`pi.exec`, in
 * mempalace.ts). The policy's own text is in the shared file.
 */
import { type Exec, Feeder as SeedFeeder, type FeedSettings } from "../../../seed-policy/feeding.ts";
import type { Stamper } from "../../../seed-policy/provenance.ts";
import type { PalaceCaller } from "../client.ts";
import type { Clock } from "../clock.ts";
import { describe, PalaceToolError } from "../errors.ts";
import { failed, resultText, type ToolResult } from "../tools.ts";

export { type Exec, type ExecResult, type FeedSettings, mineSource, type Outcome, SETTLED, SHUTDOWN, succeeded }
  from "../../../seed-policy/feeding.ts";

export class Feeder extends SeedFeeder<ToolResult> {
  constructor(settings: FeedSettings, exec: Exec, caller: PalaceCaller, stamper: Stamper, clock: Clock, stderr: (line: string) => void) {
    super(settings, exec, {
      call: (name, args, timeoutMs) => caller.callTool(name, args, timeoutMs),
      failed,
      text: resultText,
      toolErrorCode: (error) => (error instanceof PalaceToolError ? error.code : undefined),
      describe,
    }, stamper, () => clock.nowMs(), stderr);
  }
}
