// A small TypeScript MemPalace bridge for the Node host's reload tests: it connects at
// session_start (stdio `mempalace-mcp` on PATH, or MEMPALACE_REMOTE_URL), registers the palace's
// tools as they are, and closes its client at session_shutdown, whatever the reason.
//
// It also says on stderr what a reload must look like from inside: the module-level counter
// starts over on every load (pi re-imports the file), the process-wide one does not; and the
// signal of the session it was started in is aborted when pi drops the instance.
//
// `reload-leak.ts` is the same bridge with one defect (LIFE-06): it ignores a session_shutdown
// whose reason is "reload", so the old instance's child outlives the reload.

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { McpClient, StdioTransport, StreamableHttpTransport } from "@earendil-works/pi-mcp";
import { Type } from "typebox";

let moduleLoads = 0; // a fresh module on every load: always 1
const shared = globalThis as { reloadableLoads?: number };

async function connect(): Promise<McpClient> {
  const next = new McpClient({ name: "reloadable", version: "0.1.0", requestTimeoutMs: 60000 });
  const url = process.env.MEMPALACE_REMOTE_URL;
  const token = process.env.MEMPALACE_REMOTE_TOKEN;
  const transport = url
    ? new StreamableHttpTransport({ url, openGetStream: false,
      headers: token ? { Authorization: `Bearer ${token}` } : {} })
    : new StdioTransport({ command: "mempalace-mcp", args: [], stderr: "pipe" });
  await next.connect(transport);
  return next;
}

export function reloadable(pi: ExtensionAPI, { leakOnReload = false } = {}): void {
  moduleLoads += 1;
  shared.reloadableLoads = (shared.reloadableLoads ?? 0) + 1;
  console.error(`reloadable: module loads ${moduleLoads}, process loads ${shared.reloadableLoads}`);
  let client: McpClient | undefined;

  pi.on("session_start", async (event, ctx) => {
    ctx.signal?.addEventListener("abort", () => console.error(`reloadable: signal aborted (${event.reason})`));
    try {
      client = await connect();
    } catch (error) {
      console.error(`reloadable: mempalace-mcp unavailable; continuing without palace tools (${String(error)})`);
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

  pi.on("session_shutdown", async (event) => {
    if (leakOnReload && event.reason === "reload") return; // the defect: "it comes right back"
    const closing = client;
    client = undefined;
    await closing?.close();
  });
}

export default function (pi: ExtensionAPI): void {
  reloadable(pi);
}
