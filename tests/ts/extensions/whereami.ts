// Test extension: says where it runs. Its one tool answers the directory the host was in when
// the extension was imported, and what a shell it starts sees (its directory, the host mark,
// the pooled-host flag and WHEREAMI), so a pooled host can be told from one started for its run.

import { execFileSync } from "node:child_process";

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

const SHELL = 'pwd; printf "%s\\n" "${PALACE_CONFORMANCE_HOST_MARK-}" ' +
  '"${PALACE_CONFORMANCE_HOST_POOLED-unset}" "${WHEREAMI-unset}"';

export default function whereami(pi: ExtensionAPI) {
  const cwdAtImport = process.cwd();
  pi.registerTool({
    name: "whereami", label: "whereami", description: "where this extension runs",
    parameters: Type.Object({}),
    async execute() {
      const [pwd, mark, pooled, whereami] = execFileSync("sh", ["-c", SHELL], { encoding: "utf8" }).split("\n");
      const text = JSON.stringify({ cwdAtImport, pwd, mark, pooled, whereami });
      return { content: [{ type: "text", text }], details: undefined };
    },
  });
}
