#!/usr/bin/env node
// Driver host (DRIVER.md, protocol v1) for any pi extension file, and for pi-mcp-adapter.
//
// The extension is loaded the way pi loads it: jiti with `moduleCache: false` and aliases that
// point pi's own packages (`@earendil-works/*`, `@mariozechner/*`), `typebox` and
// `@sinclair/typebox` at the copies installed next to this host. Its default export is called
// with a recording fake `pi` (lib/fake-pi.mjs); driver ops then play pi's part: fire events, run
// tools through pi's argument validation and tool_call/tool_result hooks, run commands.
//
//   node extension-host.mjs --node-modules DIR --extension FILE [--capabilities a,b]
//   node extension-host.mjs --node-modules DIR --preset pi-mcp-adapter
//
// `reload` plays pi's `/reload`: `session_shutdown` (reason "reload") to the loaded instance, its
// signal aborted, then the file imported again through a fresh jiti (a new module: module-level
// state starts over) and its default export called with a new fake `pi`; the session entries are
// kept, as pi keeps the session. Children of every instance stay in `introspect.children`.
//
// `--cache-dir DIR` keeps jiti's transpile cache there (the first load of a large TypeScript
// extension such as pi-mcp-adapter takes seconds; later loads reuse the cache), and in DIR/v8
// V8's code cache of the modules jiti evaluates (lib/code-cache.mjs).
// `--protocol-fd N` names the descriptor replies go to (default 1; the Python launcher uses 3
// and points 1 at stderr). docs/typescript-hosts.md describes the mapping rules.

import { adapterConfig, adapterResultError } from "./lib/adapter.mjs";
import { useBundles } from "./lib/bundles.mjs";
import { keepCodeCache, useCodeCache } from "./lib/code-cache.mjs";
import { childrenAfter, LoadingHost, loadEnv, opsOf, replaceEnvironment, stopChildren, toolCall } from "./lib/common-ops.mjs";
import { entryFile, requireDep, packageDir, packageVersion } from "./lib/deps.mjs";
import { contentText, FakePi } from "./lib/fake-pi.mjs";
import { startObserving } from "./lib/observe.mjs";
import { hostLog } from "./lib/output.mjs";
import { OpError, parseArgs, PROTOCOL, serve } from "./lib/server.mjs";

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const fs = process.getBuiltinModule("node:fs");
const os = process.getBuiltinModule("node:os");
const path = process.getBuiltinModule("node:path");
const { pathToFileURL } = process.getBuiltinModule("node:url");

// pi's own (the harness's, never the extension's): a tool result reaches the model as its content parts
const HARNESS_CAPABILITIES = ["result_parts"];
const ALL_CAPABILITIES = ["stdio", "http", "wakeup", "feeding", "diary_command", "provenance", "mailbox",
  "session_preamble", "keepalive", "cli", "helper_group_kill", ...HARNESS_CAPABILITIES];
const ADAPTER_CAPABILITIES = ["stdio", "http", ...HARNESS_CAPABILITIES];
const EXIT_SHUTDOWN_MS = 3000;
const ADAPTER_STATUS_EVENT = "pi-mcp-adapter/status/v1";
const ADAPTER_START_WAIT_MS = 20000;

const args = parseArgs(process.argv.slice(2));
const nodeModules = path.resolve(String(args["node-modules"] ?? path.join(import.meta.dirname, "node_modules")));
// the fixed packages from their one-file bundles, when built (lib/bundles.mjs); --no-bundles: from their files
if (args["no-bundles"] !== true) useBundles(nodeModules);
const preset = typeof args.preset === "string" ? args.preset : undefined;
if (preset !== undefined && preset !== "pi-mcp-adapter") {
  process.stderr.write(`extension-host: unknown --preset ${preset} (known: pi-mcp-adapter)\n`);
  process.exit(2);
}

/** jiti aliases as pi 1.6.0 sets them for extensions, plus pi-mcp for extensions that use it. */
function piAliases() {
  const codingAgent = packageDir("@earendil-works/pi-coding-agent", nodeModules);
  const fromAgent = (specifier) => entryFile(specifier, codingAgent);
  const aiView = path.join(codingAgent, "dist", "core", "extensions", "pi-ai-extension-view.js");
  const aliases = {};
  for (const scope of ["@earendil-works", "@mariozechner"]) {
    aliases[`${scope}/pi-coding-agent`] = entryFile("@earendil-works/pi-coding-agent", nodeModules);
    aliases[`${scope}/pi-agent-core`] = fromAgent("@earendil-works/pi-agent-core");
    aliases[`${scope}/pi-tui`] = fromAgent("@earendil-works/pi-tui");
    aliases[`${scope}/pi-ai/providers/all`] = fromAgent("@earendil-works/pi-ai/providers/all");
    aliases[`${scope}/pi-ai/compat`] = aiView;
    aliases[`${scope}/pi-ai/models`] = fromAgent("@earendil-works/pi-ai/models");
    aliases[`${scope}/pi-ai/oauth`] = fromAgent("@earendil-works/pi-ai/oauth");
    aliases[`${scope}/pi-ai`] = aiView;
  }
  for (const name of ["typebox", "@sinclair/typebox"]) {
    aliases[name] = entryFile("typebox", nodeModules);
    aliases[`${name}/compile`] = entryFile("typebox/compile", nodeModules);
    aliases[`${name}/value`] = entryFile("typebox/value", nodeModules);
  }
  aliases["@earendil-works/pi-mcp"] = entryFile("@earendil-works/pi-mcp", nodeModules);
  aliases["@earendil-works/pi-mcp/oauth"] = entryFile("@earendil-works/pi-mcp/oauth", nodeModules);
  // the official MCP SDK (installed beside the hosts, pinned by the lockfile): an extension
  // built on it finds it as it would in its own node_modules
  for (const subpath of ["client", "client/index.js", "client/stdio.js", "client/streamableHttp.js",
    "client/sse.js", "types.js", "shared/protocol.js"]) {
    try {
      aliases[`@modelcontextprotocol/sdk/${subpath}`] = entryFile(`@modelcontextprotocol/sdk/${subpath}`, nodeModules);
    } catch { /* not installed: such an extension fails to load with its own import error */ }
  }
  return aliases;
}

/** pi-ai's argument validation module (throws when it cannot be loaded). */
function importValidation() {
  const ai = packageDir("@earendil-works/pi-ai", packageDir("@earendil-works/pi-coding-agent", nodeModules));
  return import(pathToFileURL(path.join(ai, "dist", "utils", "validation.js")).href);
}

/** pi-ai's `validateToolArguments` (coercion + JSON Schema check), or undefined if unloadable. */
async function loadValidator() {
  try {
    return (await importValidation()).validateToolArguments;
  } catch (error) {
    process.stderr.write(`extension-host: pi-ai validation unavailable (${error.message}); arguments go unchecked\n`);
    return undefined;
  }
}

/**
 * Resolves when pi-mcp-adapter finished the initialization it starts in the background at
 * session_start: it publishes a status snapshot naming its servers on success and logs "MCP
 * initialization failed" otherwise. `settle` waits for it, as the reference host waits for its bridge's own work.
 */
function adapterInitialized(fake, recorder) {
  return new Promise((resolve) => {
    const done = (why) => {
      hostLog(`pi-mcp-adapter start-up finished: ${why}`);
      stopStatus();
      stopEffects();
      resolve();
    };
    // an empty snapshot is the adapter shutting down the start-up it began at load time
    const stopStatus = fake.events.on(ADAPTER_STATUS_EVENT, (snapshot) => {
      const servers = Array.isArray(snapshot?.servers) ? snapshot.servers : [];
      if (servers.length === 0) return;
      done(`status ${JSON.stringify(servers.map((server) => [server.name, server.status, server.toolCount]))}`);
    });
    const stopEffects = recorder.subscribe((effect) => {
      if (effect.kind === "stderr" && /MCP initialization failed/.test(effect.line)) done(effect.line);
    });
  });
}

function extensionPath() {
  if (preset === "pi-mcp-adapter") return entryFile("pi-mcp-adapter", nodeModules);
  return typeof args.extension === "string" ? path.resolve(args.extension) : undefined;
}

/** The host's state and ops: one loaded extension (a FakePi), replaced on reload. */
class ExtensionOps extends LoadingHost {
  validate;
  adapterDir;
  loadedFile;
  loadedFlags;

  constructor(recorder) {
    super(recorder, "extension");
  }

  async hello() {
    const file = extensionPath();
    const bridge = preset === "pi-mcp-adapter"
      ? `pi-mcp-adapter ${packageVersion("pi-mcp-adapter", nodeModules) ?? "?"}`
      : `pi-extension ${file ? path.basename(file) : "(none)"}`;
    let capabilities = preset === "pi-mcp-adapter" ? ADAPTER_CAPABILITIES : ALL_CAPABILITIES;
    // every capability for an extension nobody described is a placeholder, not a claim: the
    // runner then detects what the bridge does (DRIVER.md, Capabilities)
    let source = preset === "pi-mcp-adapter" ? undefined : "default";
    if (typeof args.capabilities === "string") {
      capabilities = [...new Set([...args.capabilities.split(/[,\s]+/).filter(Boolean), ...HARNESS_CAPABILITIES])];
      source = undefined;
    }
    return { protocol: PROTOCOL, impl: "palace-conformance-pi-extension-host", bridge,
      runtime: `node ${process.versions.node}`, capabilities,
      ...(source ? { capabilities_source: source } : {}) };
  }

  async load(request) {
    if (this.fake) throw new OpError("bad_request", "the extension is already loaded");
    const env = loadEnv(request);
    const file = typeof request.options?.extension === "string"
      ? path.resolve(request.options.extension) : extensionPath();
    if (!file) throw new OpError("bad_request", "no extension file: start the host with --extension FILE");
    if (!fs.existsSync(file)) throw new OpError("bad_request", `extension file not found: ${file}`);
    replaceEnvironment(env);
    // from here on, what the bridge's own code reads is recorded (introspect.observed)
    startObserving({ host: [import.meta.dirname, nodeModules],
      bridge: [preset === "pi-mcp-adapter" ? packageDir("pi-mcp-adapter", nodeModules) : path.dirname(file)] });
    if (request.cwd) process.chdir(String(request.cwd));
    const flags = { ...(request.options?.flags ?? {}) };
    if (preset === "pi-mcp-adapter") this.adapterDir = prepareAdapter(flags);
    this.validate = await loadValidator();
    this.loadedFile = file;
    this.loadedFlags = flags;
    this.fake = await this.instantiate();
    return registered(this.fake);
  }

  /** Import the extension afresh (jiti without a module cache) and run its factory on a new `pi`. */
  async instantiate() {
    const file = this.loadedFile;
    const loading = new FakePi({ recorder: this.recorder, flags: this.loadedFlags, extensionPath: file });
    const { createJiti } = requireDep("jiti", nodeModules);
    if (typeof args["cache-dir"] === "string") useCodeCache(path.join(args["cache-dir"], "v8"));
    const jiti = createJiti(import.meta.url, { moduleCache: false, alias: piAliases(),
      ...(typeof args["cache-dir"] === "string" ? { fsCache: args["cache-dir"] } : {}) });
    let factory;
    try {
      factory = await jiti.import(file, { default: true });
    } catch (error) {
      throw new OpError("exception", `loading ${path.basename(file)} failed: ${error?.message ?? error}`);
    }
    if (typeof factory !== "function") {
      throw new OpError("exception", `${path.basename(file)} has no default export function (pi needs one)`);
    }
    try {
      await factory(loading.api);
    } catch (error) {
      throw new OpError("exception", `${path.basename(file)}'s factory threw: ${error?.message ?? error}`);
    } finally {
      keepCodeCache();
    }
    return loading;
  }

  async reload() {
    const old = this.requireLoaded();
    if (!this.shutDown) await old.emit("session_shutdown", { reason: "reload" });
    old.abort.abort();
    this.fake = undefined; // pi forgets the old instance whatever happens next
    this.shutDown = false;
    const next = await this.instantiate();
    next.entries = old.entries; // pi's session outlives the reload
    next.sessionFile = old.sessionFile;
    next.sessionName = old.sessionName;
    this.fake = next;
    return registered(this.fake);
  }

  async setSession(request) {
    const loaded = this.requireLoaded();
    const messages = Array.isArray(request.messages) ? request.messages : [];
    return { entries: loaded.setSession(messages, request.session_file) };
  }

  async event(request) {
    const loaded = this.requireLoaded();
    if (typeof request.name !== "string") throw new OpError("bad_request", "event needs 'name'");
    const payload = request.payload && typeof request.payload === "object" ? request.payload : {};
    const started = Date.now();
    let adapterReady;
    if (preset === "pi-mcp-adapter" && request.name === "session_start") {
      adapterReady = adapterInitialized(loaded, this.recorder);
      this.recorder.track(adapterReady);
    }
    const results = await loaded.emit(request.name, payload);
    if (adapterReady) await adapterStarted(adapterReady, request, started);
    if (request.name !== "before_agent_start") return null;
    return injectedBy(results, this.recorder);
  }

  async listTools() {
    const loaded = this.requireLoaded();
    return [...loaded.tools.values()].map((tool) => ({
      name: tool.name, description: tool.description ?? "", parameters: JSON.parse(JSON.stringify(tool.parameters ?? {})),
    }));
  }

  async callTool(request) {
    const loaded = this.requireLoaded();
    const name = request.name;
    const { tool, input: given } = toolCall(request, loaded.tools);
    let input = given;
    if (typeof tool.prepareArguments === "function") input = tool.prepareArguments(input);
    if (request.validate !== false && this.validate) {
      try {
        input = this.validate(tool, { type: "toolCall", id: "validation", name, arguments: input });
      } catch (error) {
        const problems = String(error.message).split("\n").filter((line) => line.startsWith("  - "))
          .map((line) => line.slice(4));
        return { content: [{ type: "text", text: error.message }], is_error: true, validation: problems };
      }
    }
    return runTool(loaded, tool, input, `call-${request.id}`);
  }

  async command(request) {
    const loaded = this.requireLoaded();
    const found = loaded.commands.get(request.name);
    if (!found) throw new OpError("no_such_command", `no command registered as ${JSON.stringify(request.name)}`);
    await found.handler(String(request.args ?? ""), loaded.commandContext());
    return null;
  }

  async shutdown(request) {
    if (this.fake && !this.shutDown) {
      this.shutDown = true;
      await this.fake.emit("session_shutdown", { reason: request.reason ?? "quit" });
      this.fake.abort.abort();
    }
    return childrenAfter(request);
  }

  async close() {
    if (this.fake && !this.shutDown) {
      this.shutDown = true;
      await Promise.race([this.fake.emit("session_shutdown", { reason: "quit" }),
        new Promise((resolve) => setTimeout(resolve, EXIT_SHUTDOWN_MS))]);
    }
    await stopChildren();
    if (this.adapterDir) fs.rmSync(this.adapterDir, { recursive: true, force: true });
  }
}

const registered = (loaded) => ({ tools: [...loaded.tools.keys()], commands: [...loaded.commands.keys()],
  events: [...loaded.handlers.keys()] });

/** pi-mcp-adapter reads only a config file of ours: write it (into a directory of its own,
 * returned) and point the adapter's flags and environment at it. */
function prepareAdapter(flags) {
  const adapterDir = fs.mkdtempSync(path.join(os.tmpdir(), "palace-pi-adapter-"));
  const configFile = path.join(adapterDir, "mcp.json");
  fs.writeFileSync(configFile, `${JSON.stringify(adapterConfig(process.env), null, 2)}\n`);
  flags["mcp-config"] ??= configFile;
  process.env.PI_MCP_CONFIG_MODE ??= "exclusive"; // read only our file, never the user's
  // the adapter's own in-memory secret store: a run never reads or writes the OS keyring
  // (on a machine without one, probing it costs a 10 s helper timeout)
  process.env.PI_MCP_ADAPTER_TEST_AUTH_STORE ??= "memory";
  return adapterDir;
}

/** pi's first prompt comes long after start-up; here the next op comes at once, so wait for
 * the adapter's background start-up (within this op's deadline) before replying. */
async function adapterStarted(adapterReady, request, started) {
  const deadline = typeof request.timeout_ms === "number" ? request.timeout_ms : 30000;
  const budget = Math.min(ADAPTER_START_WAIT_MS, deadline - 1000 - (Date.now() - started));
  let timer;
  await Promise.race([adapterReady, new Promise((resolve) => { timer = setTimeout(resolve, Math.max(0, budget)); })]);
  clearTimeout(timer);
}

/** What `before_agent_start`'s handlers injected (each message recorded) and the system prompt. */
function injectedBy(results, recorder) {
  const messages = [];
  let systemPrompt;
  for (const result of results) {
    if (typeof result.systemPrompt === "string") systemPrompt = result.systemPrompt;
    const message = result.message;
    if (!message) continue;
    const injected = { custom_type: message.customType ?? null, content: contentText(message.content) };
    recorder.record("injected", injected);
    messages.push(injected);
  }
  return systemPrompt === undefined ? { messages } : { messages, system_prompt: systemPrompt };
}

/** One tool call as pi runs it: tool_execution_start, tool_call (which may block it), the
 * tool's execute, tool_result (which may change its result), tool_execution_end. */
async function runTool(loaded, tool, input, toolCallId) {
  const name = tool.name;
  const ctx = loaded.context();
  await loaded.emit("tool_execution_start", { toolCallId, toolName: name, args: input }, ctx);
  for (const verdict of await loaded.emit("tool_call", { toolCallId, toolName: name, input }, ctx)) {
    if (verdict?.block) {
      const text = verdict.reason ?? `Tool ${name} was blocked by an extension`;
      await loaded.emit("tool_execution_end", { toolCallId, toolName: name, result: { content: [{ type: "text", text }] },
        isError: true }, ctx);
      return { content: [{ type: "text", text }], is_error: true, blocked: true };
    }
  }
  let outcome;
  let thrown;
  try {
    outcome = await tool.execute(toolCallId, input, new AbortController().signal, () => undefined, ctx);
  } catch (error) {
    thrown = error;
  }
  let content = thrown ? [{ type: "text", text: String(thrown?.message ?? thrown) }] : outcome?.content ?? [];
  let details = thrown ? undefined : outcome?.details;
  let isError = thrown ? true : Boolean(outcome?.isError);
  for (const change of await loaded.emit("tool_result",
    { toolCallId, toolName: name, input, content, details, isError }, ctx)) {
    if (Array.isArray(change.content)) content = change.content;
    if ("details" in change) details = change.details;
    if (typeof change.isError === "boolean") isError = change.isError;
  }
  await loaded.emit("tool_execution_end", { toolCallId, toolName: name, result: { content, details }, isError }, ctx);
  if (thrown) throw thrown;
  if (preset === "pi-mcp-adapter") {
    const failure = adapterResultError({ content, details, isError });
    if (failure) throw new OpError(failure.kind, failure.message, failure.extra);
  }
  const result = { content, is_error: isError };
  if (details !== undefined) result.details = details;
  return result;
}

const makeOps = (recorder) => opsOf(new ExtensionOps(recorder), recorder);

/** A pooled host's head start: jiti and pi's validation, which every load imports. */
async function preload() {
  requireDep("jiti", nodeModules);
  await importValidation();
}

await serve({ protocolFd: Number(args["protocol-fd"] ?? 1), makeOps, preload });
