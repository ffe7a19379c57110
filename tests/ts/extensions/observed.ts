// Test extension: reads, opens and starts things the way bridges do, so tests can check what the
// extension host reports in `introspect.observed` (names and paths only) and what it leaves out:
// whole-environment copies, Node's own reads, files outside HOME.

import { execFileSync, spawn, spawnSync } from "node:child_process";
import fs, { readFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function observed(pi: ExtensionAPI) {
  const timeout = process.env.OBSERVED_TOOL_TIMEOUT_MS; // a read by name
  const flagged = "OBSERVED_FLAG" in process.env; // a read too
  const copy = { ...process.env }; // a copy, not a read of every name
  const home = os.homedir();
  pi.on("session_start", async () => {
    try {
      readFileSync(path.join(home, ".config", "observed", "settings.json"), "utf8");
    } catch { /* not there: looked for all the same */ }
    fs.existsSync(path.join(home, ".observed-token"));
    await stat(path.join(home, ".observedrc")).catch(() => undefined);
    fs.existsSync("/etc/hostname"); // outside HOME: never reported
    const missing = spawn("observed-no-such-palace-mcp", [], { stdio: "ignore", env: copy });
    missing.on("error", () => undefined);
    spawnSync("observed-no-such-helper", ["--probe"]);
    execFileSync("true", []);
    console.error(`observed: started (${timeout === undefined ? "no" : "a"} timeout, flag ${flagged})`);
  });
}
