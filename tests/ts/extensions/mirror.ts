// A tiny TypeScript MemPalace bridge for the Node host's tests: it mirrors the reference bridge
// on a few behaviours and deliberately departs from it on exactly one.
//
// Mirrors: connects at session_start to `mempalace-mcp` on PATH (stdio) or to
// MEMPALACE_REMOTE_URL (streamable HTTP, `Authorization: Bearer $MEMPALACE_REMOTE_TOKEN`);
// registers every palace tool with its inputSchema passed through unchanged (Type.Unsafe);
// injects a `mempalace-wakeup` message built from mempalace_status and mempalace_diary_read
// at before_agent_start of a fresh session (reason startup or new); closes at session_shutdown.
//
// DEPARTURE (on purpose, so the conformance suite has something to catch): the wake-up is
// injected on EVERY before_agent_start of a fresh session, not only the first (WAKE-02).

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { McpClient, StdioTransport, StreamableHttpTransport } from "@earendil-works/pi-mcp";
import { Type } from "typebox";

const FRESH = new Set(["startup", "new"]);

function text(result: { content?: Array<{ type: string; text?: string }> }): string {
  return (result.content ?? []).filter((part) => part.type === "text").map((part) => part.text ?? "").join("\n");
}

// the reference's rule (features/ports.py failed()): isError, {"success": false}, or an "error" body
// without success: true, as mempalace 3.11 answers reads on a fresh palace ("Chroma database missing")
function failed(result: { isError?: unknown; content?: Array<{ type: string; text?: string }> }): boolean {
  if (result.isError) return true;
  let body: unknown;
  try {
    body = JSON.parse(text(result));
  } catch {
    return false;
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false;
  const record = body as Record<string, unknown>;
  return record.success === false || ("error" in record && record.success !== true);
}

export default function mirror(pi: ExtensionAPI) {
  let client: McpClient | undefined;
  let fresh = false;
  const agentName = process.env.MEMPALACE_AGENT_NAME || "pi";

  async function connect(): Promise<McpClient> {
    const timeout = Number(process.env.MEMPALACE_MCP_TIMEOUT_MS) || 60000;
    const next = new McpClient({ name: "mirror", version: "0.1.0", requestTimeoutMs: timeout });
    const url = process.env.MEMPALACE_REMOTE_URL;
    const token = process.env.MEMPALACE_REMOTE_TOKEN;
    const transport = url
      ? new StreamableHttpTransport({ url, openGetStream: false,
        headers: token ? { Authorization: `Bearer ${token}` } : {} })
      : new StdioTransport({ command: "mempalace-mcp", args: [], stderr: "pipe" });
    await next.connect(transport);
    return next;
  }

  pi.on("session_start", async (event) => {
    fresh = FRESH.has(String(event.reason));
    try {
      client = await connect();
    } catch (error) {
      console.error(`mirror: mempalace-mcp unavailable; continuing without palace tools (${String(error)})`);
      return;
    }
    const active = client;
    for (const tool of await active.listTools()) {
      pi.registerTool({
        name: tool.name,
        label: tool.name,
        description: tool.description ?? "",
        parameters: Type.Unsafe(tool.inputSchema),
        async execute(_id, params) {
          const result = await active.callTool(tool.name, params as Record<string, unknown>);
          return { content: result.content as Array<{ type: "text"; text: string }>, details: undefined,
            isError: Boolean(result.isError) };
        },
      });
    }
  });

  pi.on("before_agent_start", async () => {
    // the departure: the reference disarms here after the first prompt; the mirror never does
    if (!fresh || !client) return undefined;
    try {
      const status = await client.callTool("mempalace_status", {});
      const diary = await client.callTool("mempalace_diary_read", { agent_name: agentName });
      if (failed(status) || failed(diary)) return undefined;
      return {
        message: {
          customType: "mempalace-wakeup",
          // word for word the reference's text, so that a drift report shows only the departure
          content: "MemPalace wake-up: your long-term memory for this session. Orient yourself from the "
            + "palace status and your recent diary below before you answer.\n\n"
            + `## Palace status (mempalace_status)\n${text(status)}\n\n`
            + `## Your diary (mempalace_diary_read, agent_name=${agentName})\n${text(diary)}`,
          display: true,
          details: { agent_name: agentName },
        },
      };
    } catch {
      return undefined;
    }
  });

  pi.on("session_shutdown", async () => {
    const closing = client;
    client = undefined;
    await closing?.close();
  });
}
