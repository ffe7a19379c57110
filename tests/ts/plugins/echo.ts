// A small OpenCode server plugin for the host's own tests: one tool, the hooks the host maps.
// Not a bridge: it exercises every mapping in opencode-host.mjs once, so a test can see each.
import { spawn } from "node:child_process";

import type { Plugin } from "@opencode-ai/plugin";
import { tool } from "@opencode-ai/plugin";

/** A program run for its output, as a plugin with no exec API runs one: stdin ignored; killed at `killMs`. */
function runProgram(argv: string[], killMs?: number): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
    const timer = killMs === undefined ? undefined : setTimeout(() => child.kill("SIGTERM"), killMs);
    child.on("close", (code, signal) => { clearTimeout(timer); resolve(`exit ${code ?? signal}`); });
  });
}

export const EchoPlugin: Plugin = async ({ client, directory }) => {
  const seen: string[] = [];
  await client.app.log({ body: { service: "echo", level: "info", message: `loaded in ${directory}` } });
  return {
    tool: {
      echo: tool({
        description: "Echo the text back",
        args: { text: tool.schema.string(), times: tool.schema.number().optional() },
        async execute(args) {
          if (args.text === "boom") throw new Error("connection closed: echo exploded");
          if (args.text === "bad") return { output: "palace said no", metadata: { isError: true } };
          if (args.text === "run") return runProgram(["sh", "-c", "exit 3"]);
          if (args.text === "run-stalled") return runProgram(["sleep", "30"], 200);
          return args.text.repeat(args.times ?? 1);
        },
      }),
    },
    "tool.definition": async (input, output) => {
      if (input.toolID === "echo") output.description = `${output.description} (rewritten)`;
    },
    "tool.execute.before": async (input, output) => {
      if (output.args.text === "blocked") throw new Error("echo: blocked by the plugin");
    },
    "tool.execute.after": async (input, output) => {
      output.output = `${output.output}!`;
    },
    "chat.message": async (input, output) => {
      output.parts.push({ id: "prt_wake", sessionID: input.sessionID, messageID: output.message.id, type: "text",
        text: `seen: ${seen.join(",")}`, synthetic: true, metadata: { customType: "echo-wakeup" } });
    },
    "experimental.chat.system.transform": async (_input, output) => {
      output.system.push("echo system line");
    },
    event: async ({ event }) => {
      seen.push(event.type);
      if (event.type === "session.idle") {
        await client.tui.showToast({ body: { message: "idle", variant: "info" } });
      }
    },
    dispose: async () => {
      await client.app.log({ body: { service: "echo", level: "info", message: "disposed" } });
    },
  };
};
