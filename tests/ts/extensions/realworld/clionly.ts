// clionly: a pi <-> MemPalace bridge of the "shell out to the CLI" family.
//
// It never speaks MCP. At load it asks `mempalace --version` which MemPalace is installed (and
// refuses one older than 3.11), then offers two tools that run the CLI and hand back what it
// printed: `palace_search` (`mempalace search QUERY`) and `palace_status` (`mempalace status`).
// MEMPALACE_REMOTE_URL is never read. Every CLI run is bounded (15 s).
//
// The kit cannot judge such a bridge: every behaviour it checks is about an MCP session with
// the palace (timeouts, respawns, sessions, the handshake), and this bridge has none. A run is
// one *not testable* line per transport, quoting what the bridge said at start-up; it has no
// planted defect (there is nothing a scenario could catch).

import { execFile } from "node:child_process";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

const CLI_TIMEOUT_MS = 15_000;

function cli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("mempalace", args, { timeout: CLI_TIMEOUT_MS }, (error, stdout, stderr) => {
      if (error) reject(new Error(`mempalace ${args[0]} failed: ${stderr.trim() || error.message}`));
      else resolve(stdout);
    });
  });
}

export default function clionly(pi: ExtensionAPI) {
  let ready: Promise<string | undefined> | undefined;

  pi.on("session_start", async () => {
    ready ??= cli(["--version"]).then((out) => {
      const version = /(\d+)\.(\d+)\.(\d+)/.exec(out);
      if (!version || Number(version[1]) * 1000 + Number(version[2]) < 3011) {
        return `MemPalace ${out.trim() || "(unknown version)"} is older than 3.11`;
      }
      console.error(`clionly: using the ${out.trim()} CLI (no MCP server)`);
      return undefined;
    }, (error: Error) => error.message);
    const refused = await ready;
    if (refused) {
      console.error(`clionly: ${refused}; continuing without palace tools`);
      return;
    }
    pi.registerTool({
      name: "palace_search",
      label: "palace_search",
      description: "Search the memory palace (mempalace search)",
      parameters: Type.Object({ query: Type.String() }),
      async execute(_id, params) {
        const out = await cli(["search", (params as { query: string }).query]);
        return { content: [{ type: "text", text: out.trim() }], details: undefined };
      },
    });
    pi.registerTool({
      name: "palace_status",
      label: "palace_status",
      description: "Palace overview (mempalace status)",
      parameters: Type.Object({}),
      async execute() {
        const out = await cli(["status"]);
        return { content: [{ type: "text", text: out.trim() }], details: undefined };
      },
    });
  });
}
