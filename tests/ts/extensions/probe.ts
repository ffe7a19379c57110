// Test extension: touches the parts of the pi API the host fakes, so tests can check the
// effects each one records and how thrown errors map onto DRIVER.md error kinds.

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

function timeoutError(): Error {
  const error = new Error("MCP request timed out after 50ms");
  error.name = "McpTimeoutError";
  return error;
}

export default async function probe(pi: ExtensionAPI) {
  pi.registerCommand("probe", {
    description: "exercise sendMessage, sendUserMessage, notify and exec",
    handler: async (args, ctx) => {
      pi.sendMessage({ customType: "probe-note", content: `note ${args}`, display: false },
        { deliverAs: "steer" });
      pi.sendUserMessage(`please ${args}`, { deliverAs: "followUp" });
      ctx.ui.notify(`probed ${args}`, "warning");
      await pi.exec("sh", ["-c", "exit 3"]);
      await pi.exec("sleep", ["5"], { timeout: 200 });
    },
  });
  pi.on("agent_settled", async () => {
    throw new Error("agent_settled handler exploded");
  });
  pi.on("session_start", async (_event, ctx) => {
    // registered after a delay, like a bridge whose tools arrive once it has connected
    setTimeout(() => {
      pi.registerTool({
        name: "probe_late", label: "late", description: "registered 300 ms after session_start",
        parameters: Type.Object({}), async execute() {
          return { content: [{ type: "text", text: ctx.cwd }], details: undefined };
        },
      });
    }, 300);
  });
  const tool = (name: string, execute: (params: Record<string, unknown>) => Promise<unknown>) =>
    pi.registerTool({
      name, label: name, description: name, parameters: Type.Object({ key: Type.Optional(Type.String()) }),
      execute: async (_id, params) => (await execute(params as Record<string, unknown>)) as never,
    });
  tool("probe_env", async (params) => ({
    content: [{ type: "text", text: String(process.env[String(params.key)] ?? "<unset>") }], details: undefined,
  }));
  tool("probe_hang", () => new Promise(() => undefined));
  tool("probe_timeout", async () => { throw timeoutError(); });
  tool("probe_rpc_error", async () => {
    throw Object.assign(new Error("Missing required parameter 'agent_name'"), { code: -32602, data: { tool: "x" } });
  });
  tool("probe_crash", async () => { throw new TypeError("cannot read properties of undefined"); });
}
