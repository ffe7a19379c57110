// The MemPalace bridge as an OpenCode server plugin (@opencode-ai/plugin 1.18 "V1" API), on the
// official MCP SDK. A copy of the seed bridge held to the Python reference (reference/palace_bridge)
// by the conformance catalogue: same knobs, same policy where OpenCode has the hook.
//
// OpenCode fixes a plugin's tools when its function returns (`Hooks.tool`), so the palace is
// started here, inside the plugin function: the tolerant first start with its init budget and
// bounded respawn (STDIO-09), then one tool per palace tool. A palace that does not come up gives
// no tools and OpenCode keeps working (TOOL-05). `dispose` (the instance's end) stops the child.
// docs/choices.md ("The OpenCode plugin copy") says which seed features have an OpenCode hook.
//
// Only the plugin function is exported: OpenCode calls every export of a plugin file.

import type { Hooks, Plugin } from "@opencode-ai/plugin";
import { tool } from "@opencode-ai/plugin";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";

import { readConfig } from "./src/config.ts";
import type { BridgeConfig } from "./src/config.ts";
import { Mailbox, MAILBOX_TYPE } from "./src/mailbox.ts";
import { LocalPalace } from "./src/local.ts";
import type { Log } from "./src/local.ts";
import { RemotePalace } from "./src/remote.ts";
import { type Stamper, stamperFor } from "../seed-policy/provenance.ts";
import { argsShape } from "./src/schema.ts";
import { DIARY_COMMAND, DIARY_DESCRIPTION, diaryPrompt, diaryTopic } from "../seed-policy/diary.ts";
import { execWith } from "./src/exec.ts";
import { Feeder } from "./src/feeding.ts";
import { failed } from "./src/results.ts";

function stderrLog(debug: boolean): Log {
  const write = (text: string) => { process.stderr.write(`${text.split(/\s+/).join(" ").trim()}\n`); };
  return { line: write, debug: (text) => { if (debug) write(`mempalace: ${text}`); } };
}

/** What OpenCode shows the model: the text blocks; the MCP `isError` flag rides in metadata. */
function toOutput(result: CallToolResult): { output: string; metadata: Record<string, unknown> } {
  const text = result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n");
  return { output: text, metadata: { isError: result.isError === true, content: result.content } };
}

const WAKEUP_TYPE = "mempalace-wakeup";

/** The wake-up text, or undefined when either call fails: a missing wake-up beats a broken turn. */
async function wakeUp(palace: LocalPalace | RemotePalace, agentName: string, mailbox: Mailbox | undefined): Promise<string | undefined> {
  try {
    const status = await palace.callTool("mempalace_status", {});
    const diary = await palace.callTool("mempalace_diary_read", { agent_name: agentName });
    if (failed(status) || failed(diary)) return undefined;
    const owed = mailbox ? await mailbox.wakeupSection() : undefined;
    const parts = [
      "MemPalace wake-up: your long-term memory for this session. Orient yourself from the palace status and your recent diary below before you answer.",
      `## Palace status (mempalace_status)\n${toOutput(status).output}`,
      `## Your diary (mempalace_diary_read, agent_name=${agentName})\n${toOutput(diary).output}`,
    ];
    if (owed) parts.push(`## Mailbox\n${owed}`);
    return parts.join("\n\n");
  } catch {
    return undefined;
  }
}

// FEED-*: the helper run by the copy itself (OpenCode's `$` is Bun's shell), mined through this client
function makeFeeder(config: BridgeConfig, env: NodeJS.ProcessEnv, palace: LocalPalace | RemotePalace, stamper: Stamper, log: Log): Feeder | undefined {
  if (!config.feed) return undefined;
  return new Feeder({ enabled: true, bin: config.feedBin, wing: config.feedWing, debounceMs: config.feedDebounceMs,
    prepareTimeoutMs: config.feedPrepareTimeoutMs, mineTimeoutMs: config.feedMineTimeoutMs,
    remote: config.remoteUrl !== undefined, ...(config.sshTarget !== undefined ? { sshTarget: config.sshTarget } : {}) },
  execWith(env), (name, args, timeoutMs) => palace.callTool(name, args, timeoutMs), stamper, () => Date.now(), log.line);
}

export const MemPalacePlugin: Plugin = async ({ client }) => {
  // the transport, the knobs and the child's environment are taken once, here (LIFE-03)
  const config = readConfig(process.env);
  const env = { ...process.env };
  const log = stderrLog(config.debug);
  for (const warning of config.warnings) log.line(warning);
  // fail-closed: a remote URL means the remote palace and never a local child (LIFE-02)
  const palace = config.remoteUrl !== undefined ? new RemotePalace(config, log) : new LocalPalace(config, env, log);
  let feeder: Feeder | undefined;
  // the instance's end is the session's end: feed (joining a feed in flight), then stop the palace
  const hooks: Hooks = { dispose: async () => {
    try {
      await feeder?.shutdown();
    } finally {
      await palace.stop();
    }
  } };
  if (!(await palace.start())) return hooks;
  const shared = config.device !== undefined && config.remoteUrl !== undefined;
  const stamper = stamperFor(config.device, config.remoteUrl !== undefined);
  feeder = makeFeeder(config, env, palace, stamper, log);
  // MAIL-*: only on a shared palace, as this device's writer name; off with MEMPALACE_MAILBOX=0
  const mailbox = shared && config.mailbox
    ? new Mailbox((name, args) => palace.callTool(name, args), `${stamper.harness}@${config.device}`, config.mailboxPollMs)
    : undefined;
  const specs = new Map<string, Tool>(palace.tools.map((spec) => [spec.name, spec]));
  hooks.tool = Object.fromEntries([...specs.values()].map((spec) => [spec.name, tool({
    description: spec.description ?? "",
    args: argsShape(spec.inputSchema),
    async execute(args) {
      return toOutput(await palace.callTool(spec.name, stamper.stamp(spec.name, args)));
    },
  })]));
  // WAKE-*: armed when OpenCode announces a new session (not a fork: it has its parent's thread),
  // spent by that session's first message: status + diary, one synthetic text part
  const armed = new Set<string>();
  hooks.event = async ({ event }) => {
    if (event.type === "session.created" && !event.properties.info.parentID) armed.add(event.properties.info.id);
    if (event.type === "session.idle") {
      // pi's agent_settled: a feed in the background (a bug in it is one stderr line)
      feeder?.settled()?.catch((error: unknown) => log.line(`mempalace: feed: internal error: ${error instanceof Error ? error.message : String(error)}`));
    }
    // MAIL-05: the session went idle (pi's agent_settled): past the poll floor, new owed items are
    // added to the thread without a reply (OpenCode's `noReply`, pi's steer without a turn)
    if (event.type === "session.idle" && mailbox?.due()) {
      const sessionID = event.properties.sessionID;
      // the poll runs in the background; the handler returns once it is on the wire (or over)
      const onWire = palace.dispatched.next();
      // the part's metadata carries what pi's message `details` carries (the events delivered)
      const poll = mailbox.poll(async (text, details) => {
        await client.session.prompt({ path: { id: sessionID }, body: { noReply: true,
          parts: [{ type: "text", text, synthetic: true, metadata: { customType: MAILBOX_TYPE, details } }] } });
      }).catch((error: unknown) => log.line(`mempalace: mailbox: internal error: ${error instanceof Error ? error.message : String(error)}`));
      await Promise.race([onWire, poll]);
    }
  };
  hooks["chat.message"] = async (input, output) => {
    if (!armed.delete(input.sessionID)) return;
    const text = await wakeUp(palace, config.agentName, mailbox);
    if (text === undefined) return;
    output.parts.push({ id: `prt_mempalace_wakeup_${Date.now()}`, sessionID: input.sessionID, messageID: output.message.id,
      type: "text", text, synthetic: true, metadata: { customType: WAKEUP_TYPE } });
  };
  // DIARY-01: OpenCode's commands come from its config, which the `config` hook may add to; the
  // prompt is written in `command.execute.before` (the topic collapsed, as the other copies do)
  hooks.config = async (cfg) => {
    cfg.command = { ...cfg.command, [DIARY_COMMAND]: { template: "$ARGUMENTS", description: DIARY_DESCRIPTION } };
  };
  hooks["command.execute.before"] = async (input, output) => {
    if (input.command !== DIARY_COMMAND) return;
    const text = diaryPrompt(config.agentName, diaryTopic(input.arguments));
    output.parts.splice(0, output.parts.length, { type: "text", text } as (typeof output.parts)[number]);
  };
  hooks["tool.definition"] = async (input, output) => {
    const spec = specs.get(input.toolID);
    if (spec) output.parameters = spec.inputSchema; // TOOL-01: the palace's schema, untouched
  };
  return hooks;
};
