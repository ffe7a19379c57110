#!/usr/bin/env node
// Driver host (DRIVER.md, protocol v1) for a bridge made of pi's own MCP client.
//
//   node mcp-host.mjs --node-modules DIR --mode raw      McpClient + one transport, nothing else
//   node mcp-host.mjs --node-modules DIR --mode wrapped  the same client inside pi 1.6.0's
//                                                        McpServerConnection
//
// raw: `@earendil-works/pi-mcp` as a library user gets it: a StdioTransport for `mempalace-mcp`
// on PATH, or a StreamableHttpTransport when MEMPALACE_REMOTE_URL is set (Authorization from
// MEMPALACE_REMOTE_TOKEN). It fails fast and never heals: no re-initialize on a 404, no respawn
// (research/pi-mcp-clients.md §3.2).
//
// wrapped: what a pi 1.x user actually runs. `McpServerConnection` and `createDefaultTransport`
// are imported from pi-coding-agent's own dist (`dist/extensions/mcp/runtime.js`, not an
// exported subpath, so the file is loaded by path), not reimplemented: a new session plus one
// retry on a 404, a respawn on the next call after the stdio child exited, two HTTP connect
// retries, a 60 s default timeout (§3.3). The server entry is what a user would put in
// ~/.pi/agent/mcp.json: `{"command": "mempalace-mcp"}`, or `{"url": …, "headers":
// {"Authorization": "Bearer ${MEMPALACE_REMOTE_TOKEN}"}}`.
//
// Both connect at `session_start` (pi connects configured servers then) and register the
// palace's tools under their own names with their schemas unchanged (pi itself would name them
// `mcp__mempalace__<tool>`; fixtures call catalogue names). MEMPALACE_MCP_TIMEOUT_MS, when set,
// becomes the client's request timeout (pi's `timeout` setting, in ms). Neither shape has a
// wake-up, feeding, commands or any other bridge feature: capabilities are `stdio http`.

import { useBundles } from "./lib/bundles.mjs";
import { children, killChildren } from "./lib/children.mjs";
import { childrenAfter, loadEnv, opsOf, replaceEnvironment, toolCall } from "./lib/common-ops.mjs";
import { importDep, packageDir, packageVersion } from "./lib/deps.mjs";
import { hostLog } from "./lib/output.mjs";
import { OpError, parseArgs, PROTOCOL, serve } from "./lib/server.mjs";

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const path = process.getBuiltinModule("node:path");
const { pathToFileURL } = process.getBuiltinModule("node:url");

const SERVER_NAME = "mempalace";

const args = parseArgs(process.argv.slice(2));
const nodeModules = path.resolve(String(args["node-modules"] ?? path.join(import.meta.dirname, "node_modules")));
// the fixed packages from their one-file bundles, when built (lib/bundles.mjs); --no-bundles: from their files
if (args["no-bundles"] !== true) useBundles(nodeModules);
const mode = String(args.mode ?? "raw");
if (mode !== "raw" && mode !== "wrapped") {
  process.stderr.write(`mcp-host: unknown --mode ${mode} (raw or wrapped)\n`);
  process.exit(2);
}

function timeoutFromEnv() {
  const value = Number(process.env.MEMPALACE_MCP_TIMEOUT_MS);
  return Number.isFinite(value) && value > 0 ? value : undefined;
}

/** The bridge: connect, list tools, call tools, close. */
class RawBridge {
  constructor(mcp) {
    this.mcp = mcp;
    this.client = undefined;
    this.tools = [];
  }

  async connect() {
    const { McpClient, StdioTransport, StreamableHttpTransport } = this.mcp;
    const timeout = timeoutFromEnv();
    this.client = new McpClient({ name: "pi", version: packageVersion("@earendil-works/pi-mcp", nodeModules),
      ...(timeout ? { requestTimeoutMs: timeout } : {}) });
    this.client.onError((error) => hostLog(`pi-mcp: ${error?.message ?? error}`));
    const url = process.env.MEMPALACE_REMOTE_URL;
    const token = process.env.MEMPALACE_REMOTE_TOKEN;
    const transport = url
      ? new StreamableHttpTransport({ url, headers: token ? { Authorization: `Bearer ${token}` } : {} })
      : new StdioTransport({ command: "mempalace-mcp", args: [], cwd: process.cwd(), stderr: "pipe" });
    await this.client.connect(transport);
    this.tools = await this.client.listTools();
    return this.tools;
  }

  callTool(name, input) {
    if (!this.client) throw new OpError("unavailable", "not connected: the session_start connect failed or never ran");
    return this.client.callTool(name, input);
  }

  async close() {
    await this.client?.close().catch(() => undefined);
  }
}

/** pi 1.6.0's McpServerConnection around the same client. */
class WrappedBridge {
  constructor(runtime, onTools) {
    this.runtime = runtime;
    this.onTools = onTools;
    this.connection = undefined;
  }

  entry() {
    const config = {};
    const timeout = timeoutFromEnv();
    if (timeout) config.timeout = timeout / 1000;
    if (process.env.MEMPALACE_REMOTE_URL) {
      config.url = process.env.MEMPALACE_REMOTE_URL;
      if (process.env.MEMPALACE_REMOTE_TOKEN) {
        config.headers = { Authorization: "Bearer ${MEMPALACE_REMOTE_TOKEN}" };
      }
    } else {
      config.command = "mempalace-mcp";
      config.args = [];
    }
    return { name: SERVER_NAME, config };
  }

  async connect() {
    const { McpServerConnection, McpOAuthCredentialStore, createDefaultTransport } = this.runtime;
    this.connection = new McpServerConnection({
      entry: this.entry(),
      cwd: process.cwd(),
      createTransport: createDefaultTransport,
      credentials: new McpOAuthCredentialStore(),
      onTools: (connection) => this.onTools(connection.tools),
      onChange: (connection) => hostLog(`pi McpServerConnection ${connection.name}: ${connection.state}` +
        (connection.error ? ` (${connection.error.split("\n")[0]})` : "")),
    });
    await this.connection.getClient();
    return this.connection.tools;
  }

  callTool(name, input) {
    if (!this.connection) throw new OpError("unavailable", "not connected: session_start never ran");
    return this.connection.callTool(name, input, { timeoutMs: this.connection.timeoutMs, onProgress: () => undefined });
  }

  async close() {
    await this.connection?.close().catch(() => undefined);
  }
}

async function loadWrappedRuntime() {
  const agent = packageDir("@earendil-works/pi-coding-agent", nodeModules);
  return import(pathToFileURL(path.join(agent, "dist", "extensions", "mcp", "runtime.js")).href);
}

/** The host's state and ops: one MCP client (raw or wrapped) and the tools it found. */
class McpOps {
  bridge;
  loaded = false;
  tools = new Map();
  entries = [];

  constructor(recorder) {
    this.recorder = recorder;
  }

  registerTools(list) {
    for (const tool of list ?? []) {
      const parameters = tool.inputSchema ?? { type: "object" };
      const before = this.tools.get(tool.name);
      this.tools.set(tool.name, { name: tool.name, description: tool.description ?? "", parameters });
      if (before && JSON.stringify(before.parameters) === JSON.stringify(parameters) &&
        before.description === (tool.description ?? "")) continue;
      this.recorder.record("tool_registered", { name: tool.name, description: tool.description ?? "", parameters });
    }
  }

  async load(request) {
    if (this.loaded) throw new OpError("bad_request", "the bridge is already loaded");
    replaceEnvironment(loadEnv(request));
    if (request.cwd) process.chdir(String(request.cwd));
    this.bridge = mode === "raw"
      ? new RawBridge(await importDep("@earendil-works/pi-mcp", nodeModules))
      : new WrappedBridge(await loadWrappedRuntime(), (list) => this.registerTools(list));
    this.loaded = true;
    return { tools: [], commands: [], events: ["session_start", "session_shutdown"] };
  }

  requireLoaded() {
    if (!this.loaded) throw new OpError("bad_request", "load the bridge first");
  }

  async event(request) {
    this.requireLoaded();
    if (typeof request.name !== "string") throw new OpError("bad_request", "event needs 'name'");
    if (request.name === "session_start") {
      try {
        this.registerTools(await this.bridge.connect());
      } catch (error) {
        this.recorder.record("error", { where: "session_start", message: `${error?.name ?? "Error"}: ${error?.message ?? error}` });
      }
    } else if (request.name === "session_shutdown") {
      await this.bridge.close();
    }
    return request.name === "before_agent_start" ? { messages: [] } : null;
  }

  async callTool(request) {
    this.requireLoaded();
    const { input } = toolCall(request, this.tools);
    const result = await this.bridge.callTool(request.name, input);
    const reply = { content: result?.content ?? [], is_error: Boolean(result?.isError) };
    if (result?.structuredContent !== undefined) reply.details = { structuredContent: result.structuredContent };
    return reply;
  }

  async setSession(request) {
    this.entries.splice(0, this.entries.length, ...(Array.isArray(request.messages) ? request.messages : []));
    return { entries: this.entries.length };
  }

  async shutdown(request) {
    if (this.bridge) await this.bridge.close();
    return childrenAfter(request);
  }

  async listTools() {
    return [...this.tools.values()];
  }

  async hello() {
    const version = packageVersion("@earendil-works/pi-mcp", nodeModules) ?? "?";
    const bridgeName = mode === "raw"
      ? `@earendil-works/pi-mcp ${version} (raw McpClient)`
      : `@earendil-works/pi-mcp ${version} in @earendil-works/pi-coding-agent ` +
        `${packageVersion("@earendil-works/pi-coding-agent", nodeModules) ?? "?"} McpServerConnection`;
    return { protocol: PROTOCOL, impl: `palace-conformance-pi-mcp-host-${mode}`, bridge: bridgeName,
      runtime: `node ${process.versions.node}`, capabilities: ["stdio", "http", "result_parts"] };
  }

  async command(request) {
    throw new OpError("no_such_command", `no command registered as ${JSON.stringify(request.name)}`);
  }

  // pi's MCP client is no extension: /reload re-imports extensions, not this client, so there is
  // nothing to reload; the runner reports a reload scenario not applicable on this answer
  async reload() {
    throw new OpError("bad_request", "pi's MCP client is not a pi extension: /reload has " +
      "nothing to re-import here (run reload scenarios with --bridge pi-extension:FILE)");
  }

  async close() {
    if (this.bridge) await this.bridge.close();
    killChildren();
  }
}

const makeOps = (recorder) => opsOf(new McpOps(recorder), recorder,
  () => ({ children: children(), api_touched: [] }));

/** A pooled host's head start: pi-mcp, which every load imports. */
async function preload() {
  await importDep("@earendil-works/pi-mcp", nodeModules);
}

await serve({ protocolFd: Number(args["protocol-fd"] ?? 1), makeOps, preload });
