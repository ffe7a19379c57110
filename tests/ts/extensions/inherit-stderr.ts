// Test extension: starts children whose stderr is inherited (the official SDK's default for
// StdioClientTransport), at load and in a tool. What they write there must still reach the
// host's record of the bridge's stderr, line by line, a last line without a newline too, from
// asynchronous children (spawn) and synchronous ones (spawnSync, execFileSync, execSync) alike,
// a synchronous child that fails too (its error thrown as Node throws it).

import { execFileSync, execSync, spawn, spawnSync } from "node:child_process";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "@sinclair/typebox";

function run(script: string, stdio: "inherit" | ["ignore", "ignore", "inherit"]): Promise<void> {
  return new Promise((resolve) => {
    spawn("sh", ["-c", script], { stdio }).on("close", () => resolve());
  });
}

export default async function inheritStderr(pi: ExtensionAPI) {
  await run("echo 'child: first line' >&2; printf 'child: no newline' >&2",
            ["ignore", "ignore", "inherit"]);
  // a synchronous child (spawnSync) with its stderr inherited, args given and options alone
  spawnSync("sh", ["-c", "echo 'sync child: one' >&2; printf 'sync child: two' >&2"],
            { stdio: ["ignore", "ignore", "inherit"] });
  spawnSync("true", { stdio: "inherit" });
  // execFileSync and execSync with their stderr inherited explicitly (without `stdio` Node
  // passes it through process.stderr itself)
  execFileSync("sh", ["-c", "echo 'execFileSync child: one' >&2"], { stdio: ["ignore", "ignore", "inherit"] });
  execSync("echo 'execSync child: one' >&2", { stdio: "inherit" });
  try {
    execFileSync("sh", ["-c", "echo 'execFileSync child: failing' >&2; exit 3"], { stdio: "inherit" });
    console.error("inherit-stderr: a failing execFileSync did not throw");
  } catch (error) {
    if ((error as { status?: number }).status !== 3) console.error("inherit-stderr: wrong exit status");
  }
  pi.registerTool({
    name: "inherit_echo",
    label: "inherit echo",
    description: "a child with stdio inherit says the text on stderr",
    parameters: Type.Object({ text: Type.String() }),
    async execute(_id, params: { text: string }) {
      await run(`echo "child: $0" >&2`.replace("$0", params.text.replace(/[^a-z]/g, "")),
                "inherit");
      spawnSync("sh", ["-c", `echo "sync child: ${params.text.replace(/[^a-z]/g, "")}" >&2`],
                { stdio: "inherit" });
      execSync(`echo "execSync child: ${params.text.replace(/[^a-z]/g, "")}" >&2`,
               { stdio: ["ignore", "ignore", "inherit"] });
      return { content: [{ type: "text", text: params.text }] };
    },
  });
}
