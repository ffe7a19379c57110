/**
 * pi ↔ MemPalace MCP bridge: the pi extension copy (`~/.pi/agent/extensions/mempalace.ts`).
 *
 * At load it reads the environment once (LIFE-03), starts the palace client (a supervised local
 * `mempalace-mcp` child, or the remote palace over HTTP on pi's own MCP client when
 * MEMPALACE_REMOTE_URL is set) and registers every palace tool with its real inputSchema passed
 * through with Type.Unsafe (TOOL-01). When the palace is unavailable it registers nothing and pi
 * carries on (fail-soft locally, fail-closed remotely, TOOL-05). Then it wires the features onto
 * pi's events: wake-up (before_agent_start), feeding (session_shutdown, agent_settled), the
 * /mempalace-diary command, device provenance on writes, and the mailbox.
 *
 * Policy (budgets, backoff, retries, owed-ness) lives in src/ as plain code over events and a
 * clock; this file is the wiring. Mirrors reference/palace_bridge (the Python copy) knob for knob.
 */
import { Type } from "typebox";
import { createClient, type PalaceClient } from "./src/client.ts";
import { SYSTEM_CLOCK, timerMs } from "./src/clock.ts";
import { type BridgeConfig, readConfig, sharedPalace } from "./src/config.ts";
import { describe } from "./src/errors.ts";
import { DIARY_COMMAND, DIARY_DESCRIPTION, diaryPrompt, diaryTopic } from "../seed-policy/diary.ts";
import { Feeder } from "./src/features/feeding.ts";
import { Mailbox } from "./src/features/mailbox.ts";
import { type Stamper, stamperFor } from "../seed-policy/provenance.ts";
import { WakeUp } from "./src/features/wakeup.ts";
import type { ExtensionAPI, ToolOutcome } from "./src/pi-api.ts";
import type { ToolSpec } from "./src/tools.ts";

const stderrLine = (line: string): void => {
  try {
    process.stderr.write(`${line}\n`);
  } catch {
    // a closed stderr must not break pi
  }
};

/** The environment as it is now: read once, later changes change nothing (LIFE-03). */
function snapshotEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (typeof value === "string") env[key] = value;
  return env;
}

function registerTools(pi: ExtensionAPI, client: PalaceClient, stamper: Stamper, specs: readonly ToolSpec[]): void {
  for (const spec of specs) {
    pi.registerTool({
      name: spec.name,
      label: spec.name,
      description: spec.description,
      // the Type.Unsafe gotcha: the palace's own schema, unchanged, so the model sees every name
      parameters: Type.Unsafe<Record<string, unknown>>(spec.inputSchema),
      async execute(_toolCallId, params): Promise<ToolOutcome> {
        const result = await client.callTool(spec.name, stamper.stamp(spec.name, params ?? {}));
        return { content: result.content, details: result.structured === undefined ? undefined : { structured: result.structured },
          isError: result.isError };
      },
    });
  }
}

function wireFeatures(pi: ExtensionAPI, config: BridgeConfig, client: PalaceClient, stamper: Stamper,
  background: (what: string, work: Promise<unknown>) => Promise<unknown>): { feeder?: Feeder } {
  const mailbox = sharedPalace(config) && config.mailbox
    ? new Mailbox(client, stamper.writer, config.mailboxPollMs, SYSTEM_CLOCK, (customType, content, details) =>
      pi.sendMessage({ customType, content, display: true, details }, { deliverAs: "steer", triggerTurn: false }))
    : undefined;
  const wakeup = new WakeUp(client, config.agentName, mailbox);
  const feeder = config.feed
    ? new Feeder({
      enabled: true, bin: config.feedBin, wing: config.feedWing, debounceMs: config.feedDebounceMs,
      prepareTimeoutMs: config.feedPrepareTimeoutMs, mineTimeoutMs: config.feedMineTimeoutMs,
      remote: Boolean(config.remoteUrl), sshTarget: config.sshTarget,
    }, (command, args, timeout) => pi.exec(command, args, timeout === undefined ? {} : { timeout: timerMs(timeout) }),
    client, stamper, SYSTEM_CLOCK, stderrLine)
    : undefined;

  pi.registerCommand(DIARY_COMMAND, {
    description: DIARY_DESCRIPTION,
    handler: async (args) => pi.sendUserMessage(diaryPrompt(config.agentName, diaryTopic(args))),
  });
  pi.on("session_start", (event) => wakeup.sessionStart(event.reason));
  pi.on("before_agent_start", async () => {
    const message = await wakeup.beforeAgentStart();
    return message ? { message } : undefined;
  });
  pi.on("agent_settled", async () => {
    const feed = feeder?.settled();
    if (feed) background("feed", feed);
    if (mailbox?.due()) {
      // the poll runs in the background; the handler returns once it is on the wire (or over)
      const onWire = client.nextDispatch();
      const poll = background("mailbox", mailbox.poll());
      await Promise.race([onWire, poll]);
    }
  });
  return { feeder };
}

export default async function mempalace(pi: ExtensionAPI): Promise<void> {
  // each knob read by name, once (as the seed's createClient() reads process.env.MEMPALACE_REMOTE_URL);
  // the child gets the environment as it was at load
  const config = readConfig(process.env);
  const env = snapshotEnv();
  for (const warning of config.warnings) stderrLine(warning);
  const client = createClient(config, env);
  const stamper = stamperFor(config.device, sharedPalace(config), config.harness);
  // work an event starts and does not wait for; a bug in it becomes one stderr line, never a rejection
  const background = (what: string, work: Promise<unknown>): Promise<unknown> =>
    work.catch((error: unknown) => stderrLine(`mempalace: ${what}: internal error: ${describe(error)}`));
  let feeder: Feeder | undefined;
  pi.on("session_shutdown", async () => {
    try {
      await feeder?.shutdown();
    } finally {
      await client.stop();
    }
  });

  if (!(await client.start())) return; // fail-soft / fail-closed: no palace tools, pi carries on
  registerTools(pi, client, stamper, await client.tools());
  ({ feeder } = wireFeatures(pi, config, client, stamper, background));
}
