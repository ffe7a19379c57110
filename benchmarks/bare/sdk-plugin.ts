// The bare official SDK as an OpenCode plugin, the yardstick of benchmarks/bench_copies.py: one
// `Client` on `StdioClientTransport` (or `StreamableHTTPClientTransport` when
// MEMPALACE_REMOTE_URL is set), connected once, one tool per palace tool, each call a plain
// `callTool`. No policy at all: no budgets, respawn, keep-alive, id checks or stream guard.

import type { Plugin } from "@opencode-ai/plugin";
import { tool } from "@opencode-ai/plugin";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

export const BareSdkPlugin: Plugin = async () => {
  const url = process.env["MEMPALACE_REMOTE_URL"];
  const env = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
  const transport = url ? new StreamableHTTPClientTransport(new URL(url))
    : new StdioClientTransport({ command: "mempalace-mcp", args: [], env, stderr: "ignore" });
  const client = new Client({ name: "bare-sdk", version: "0.0.0" }, { capabilities: {} });
  await client.connect(transport);
  const { tools } = await client.listTools();
  return {
    dispose: async () => { await client.close(); },
    tool: Object.fromEntries(tools.map((spec) => [spec.name, tool({
      description: spec.description ?? "",
      args: Object.fromEntries(Object.keys(spec.inputSchema.properties ?? {}).map((k) => [k, tool.schema.any().optional()])),
      async execute(args) {
        const result = await client.callTool({ name: spec.name, arguments: args });
        const blocks = Array.isArray(result.content) ? result.content : [];
        return blocks.map((b: { type?: string; text?: string }) => (b.type === "text" ? b.text ?? "" : "")).join("\n");
      },
    })])),
  };
};
