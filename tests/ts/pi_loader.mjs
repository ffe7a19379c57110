// Loads extensions the way pi 1.x does, with pi's own loader (discoverAndLoadExtensions: jiti,
// pi's alias table), from AGENT_DIR/extensions, then fires session_shutdown on each and prints
// what pi registered as one JSON line. Usage: node pi_loader.mjs PI_PACKAGE_DIR AGENT_DIR CWD
import path from "node:path";
import { pathToFileURL } from "node:url";

const [piDir, agentDir, cwd] = process.argv.slice(2);
const pi = await import(pathToFileURL(path.join(piDir, "dist", "index.js")).href);
const loaded = await pi.discoverAndLoadExtensions([], cwd, agentDir);
const report = {
  errors: loaded.errors,
  extensions: loaded.extensions.map((extension) => ({
    path: extension.path,
    tools: [...extension.tools.keys()],
    commands: [...extension.commands.keys()],
    events: [...extension.handlers.keys()].sort(),
    schemas: Object.fromEntries([...extension.tools].map(([name, tool]) => [name, tool.definition.parameters])),
  })),
};
for (const extension of loaded.extensions) {
  for (const handler of extension.handlers.get("session_shutdown") ?? []) {
    await handler({ type: "session_shutdown", reason: "quit" }, {});
  }
}
process.stdout.write(`${JSON.stringify(report)}\n`);
