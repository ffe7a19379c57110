#!/usr/bin/env node
// Driver host (DRIVER.md, protocol v1) for any OpenCode server plugin (`@opencode-ai/plugin`
// 1.18.33, the "V1" API).
//
// The plugin file is imported through jiti (TypeScript as OpenCode's Bun would run it), with
// `@opencode-ai/plugin` and `@modelcontextprotocol/sdk` aliased to the pinned copies next to this
// host. Its plugin functions are called as OpenCode calls them: the module's `default` when it is
// `{server}` (the module form), else every export (the legacy form), each as `fn(input, options)`,
// one after the other; then every hook object's `config(cfg)`. Driver ops then play OpenCode's
// part on the hooks the plugin returned (docs/typescript-hosts.md, "The OpenCode plugin host"):
//
//   session_start       -> bus event `session.created` (fire-and-forget, as OpenCode's bus)
//   before_agent_start  -> `chat.message` (parts added = injected) + `experimental.chat.system.transform`
//   agent_settled       -> bus events `session.status` (idle), then `session.idle`
//   agent_end           -> nothing (OpenCode's loop runs on to what is queued; it goes idle once)
//   session_shutdown    -> bus event `server.instance.disposed`, then `dispose()`
//   (a program run)     -> a child the plugin starts with no stdin (a helper run for its output)
//                          is recorded as an `exec` effect, as pi's `exec` records one
//   call_tool           -> zod check of `args`, `tool.execute.before`, `execute`, `tool.execute.after`
//   list_tools          -> each tool's zod shape as JSON Schema, rewritten by `tool.definition`
//
//   command             -> a command the plugin added to the config in `config(cfg)` (OpenCode's
//                          commands come from its config): its template with the arguments,
//                          `command.execute.before`, then the parts sent as the user's message
//
// OpenCode server plugins have no reload: `reload` answers `bad_request` (the runner reports
// those scenarios not applicable); a command no plugin added answers `no_such_command`.
//
//   node opencode-host.mjs --node-modules DIR --plugin FILE [--capabilities a,b]

import { useBundles } from "./lib/bundles.mjs";
import { keepCodeCache, useCodeCache } from "./lib/code-cache.mjs";
import { childrenAfter, LoadingHost, loadEnv, opsOf, replaceEnvironment, stopChildren, toolCall } from "./lib/common-ops.mjs";
import { observeProgramRuns } from "./lib/children.mjs";
import { entryFile, requireDep, packageVersion } from "./lib/deps.mjs";
import { classify } from "./lib/errors.mjs";
import { startObserving } from "./lib/observe.mjs";
import { OpError, parseArgs, PROTOCOL, serve } from "./lib/server.mjs";

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const fs = process.getBuiltinModule("node:fs");
const path = process.getBuiltinModule("node:path");
const { pathToFileURL } = process.getBuiltinModule("node:url");

/**
 * What an OpenCode server plugin can have a hook for: every seed capability but `result_parts`
 * (a plugin tool's result is one string, so a palace result's content parts reach the model joined).
 */
const OPENCODE_CAPABILITIES = ["stdio", "http", "wakeup", "feeding", "diary_command", "provenance", "mailbox",
  "session_preamble", "keepalive"];
const EXIT_SHUTDOWN_MS = 3000;
const SESSION_ID = "ses_palace_conformance";
const SDK_SUBPATHS = ["client/index.js", "client/stdio.js", "client/streamableHttp.js", "client/sse.js",
  "types.js", "shared/protocol.js", "shared/transport.js", "shared/stdio.js"];
// the official SDK's ErrorCode values for its own failures (not the palace's)
const SDK_CONNECTION_CLOSED = -32000;
const SDK_REQUEST_TIMEOUT = -32001;

const args = parseArgs(process.argv.slice(2));
const nodeModules = path.resolve(String(args["node-modules"] ?? path.join(import.meta.dirname, "node_modules")));
// the fixed packages from their one-file bundles, when built (lib/bundles.mjs); --no-bundles: from their files
if (args["no-bundles"] !== true) useBundles(nodeModules);

function aliases() {
  const table = {
    "@opencode-ai/plugin": entryFile("@opencode-ai/plugin", nodeModules),
    "@opencode-ai/plugin/tool": entryFile("@opencode-ai/plugin/tool", nodeModules),
  };
  for (const sub of SDK_SUBPATHS) {
    table[`@modelcontextprotocol/sdk/${sub}`] = entryFile(`@modelcontextprotocol/sdk/${sub}`, nodeModules);
  }
  return table;
}

/** The text of a tool result or message part list. */
function partsText(parts) {
  return parts.filter((part) => part?.type === "text" && typeof part.text === "string")
    .map((part) => part.text).join("\n");
}

/**
 * lib/errors.mjs's rules, with two for the official SDK, which OpenCode plugins use: its own
 * timeout and closed-connection errors carry JSON-RPC codes but are not palace errors; and an
 * error with an HTTP `status` is an HTTP error even when it also carries the JSON-RPC `code` of
 * the body (a proxy's 502 with a JSON-RPC error), which is kept.
 */
function classifyOpenCode(error) {
  const message = String(error?.message ?? error);
  if (error?.name === "McpError" || error?.constructor?.name === "McpError") {
    if (error.code === SDK_REQUEST_TIMEOUT) return new OpError("timeout", message);
    if (error.code === SDK_CONNECTION_CLOSED && /Connection closed$/.test(message)) {
      return new OpError("connection_closed", message);
    }
  }
  if (typeof error?.status === "number" && error.status >= 300 && Number.isInteger(error?.code)) {
    const kind = error.status === 401 || error.status === 403 ? "auth" : "http_error";
    return new OpError(kind, message, { code: error.code, data: { status: error.status } });
  }
  if (error instanceof OpError) return error;
  const payload = classify(error);
  const { kind, message: text, ...extra } = payload;
  return new OpError(kind, text, extra);
}

/**
 * The recording stand-in for what OpenCode hands a plugin (`PluginInput`): the SDK client's
 * `app.log`, `tui.showToast`, `session.prompt`/`promptAsync`/`messages`, recorded as effects.
 */
class FakeOpenCode {
  constructor(recorder) {
    this.recorder = recorder;
    this.touched = new Set();
    this.messages = [];
    this.abort = new AbortController();
    const ok = (data) => Promise.resolve({ data, error: undefined });
    const prompt = (request) => {
      const body = request?.body ?? {};
      const parts = Array.isArray(body.parts) ? body.parts : [];
      const tagged = parts.find((part) => typeof part?.metadata?.customType === "string");
      // `noReply` adds the message to the thread at once without a turn: pi's steer with no
      // triggered turn (pi's nextTurn would hold it back until the next prompt). A part's
      // metadata is the plugin's own data on the message, as pi's `details` is
      const details = tagged?.metadata?.details;
      recorder.record("message", { custom_type: tagged?.metadata.customType ?? null, content: partsText(parts),
        display: true, details: details === undefined ? null : details,
        deliver_as: body.noReply ? "steer" : "followUp", trigger_turn: !body.noReply });
      return ok({});
    };
    const client = {
      app: {
        log: (request) => {
          const body = request?.body ?? {};
          const line = `[${body.service ?? "plugin"}] ${body.level ?? "info"}: ${body.message ?? ""}`;
          process.stderr.write(`${line}\n`); // becomes a `stderr` effect, as a pi extension's console output does
          return ok(true);
        },
      },
      tui: {
        showToast: (request) => {
          const body = request?.body ?? {};
          recorder.record("notify", { level: body.variant ?? "info", message: String(body.message ?? "") });
          return ok(true);
        },
      },
      session: {
        prompt,
        promptAsync: prompt,
        messages: () => ok(this.messages),
      },
    };
    this.client = this.touching(client, "client");
  }

  touching(target, prefix) {
    return new Proxy(target, {
      get: (object, property, receiver) => {
        if (typeof property !== "string" || property === "then") return Reflect.get(object, property, receiver);
        const name = `${prefix}.${property}`;
        if (!(property in object)) {
          this.touched.add(`${name} (missing)`);
          return undefined;
        }
        this.touched.add(name);
        const value = Reflect.get(object, property, receiver);
        return value && typeof value === "object" ? this.touching(value, name) : value;
      },
    });
  }

  input(cwd) {
    return {
      client: this.client,
      project: { id: "palace-conformance", worktree: cwd, vcs: undefined, time: { created: Date.now() } },
      directory: cwd,
      worktree: cwd,
      serverUrl: new URL("http://127.0.0.1:4096"),
      $: undefined, // Bun's shell: OpenCode leaves it undefined outside Bun
    };
  }

  /** `set_session` messages in OpenCode's `{info, parts}` shape, for `client.session.messages`. */
  setSession(messages) {
    this.messages = messages.map((message, index) => {
      const role = message?.role === "assistant" ? "assistant" : "user";
      const content = message?.content;
      const text = typeof content === "string" ? content
        : Array.isArray(content) ? partsText(content) : "";
      const id = `msg_${index}`;
      return { info: { id, sessionID: SESSION_ID, role }, parts: [{ id: `prt_${index}`, sessionID: SESSION_ID,
        messageID: id, type: "text", text }] };
    });
    return this.messages.length;
  }
}

/** The plugin functions of a module, the way OpenCode 1.18 finds them. */
function pluginFunctions(module, file) {
  const name = path.basename(file);
  const main = module.default;
  if (main && typeof main === "object" && typeof main.server === "function") return [main.server];
  const seen = new Set();
  const found = [];
  for (const value of Object.values(module)) {
    if (seen.has(value)) continue;
    seen.add(value);
    if (typeof value === "function") found.push(value);
    else if (value && typeof value === "object" && typeof value.server === "function") found.push(value.server);
    else throw new OpError("exception", `${name}: Plugin export is not a function (OpenCode calls every export)`);
  }
  if (found.length === 0) throw new OpError("exception", `${name} exports no plugin function`);
  return found;
}

/** The host's state and ops: the loaded plugins' hooks, their tools and the merged config. */
class OpenCodeOps extends LoadingHost {
  hooks = [];
  tools = new Map();
  z;
  config = { command: {} };
  prompts = 0;

  constructor(recorder) {
    super(recorder, "plugin");
  }

  async hello() {
    const file = pluginFile();
    let capabilities = OPENCODE_CAPABILITIES;
    let source = "default";
    if (typeof args.capabilities === "string") {
      capabilities = args.capabilities.split(/[,\s]+/).filter(Boolean);
      source = undefined;
    }
    return { protocol: PROTOCOL, impl: "palace-conformance-opencode-plugin-host",
      bridge: `opencode-plugin ${file ? path.basename(file) : "(none)"} (@opencode-ai/plugin ${
        packageVersion("@opencode-ai/plugin", nodeModules) ?? "?"})`,
      runtime: `node ${process.versions.node}`, capabilities, ...(source ? { capabilities_source: source } : {}) };
  }

  /** Every hook object's `name` function, in load order (OpenCode's `trigger`, one output object). */
  async trigger(name, input, output) {
    for (const hook of this.hooks) {
      const fn = hook?.[name];
      if (typeof fn === "function") await fn(input, output);
    }
    return output;
  }

  /** A bus event: OpenCode delivers it with `void hook.event(...)`; `settle` waits for it here. */
  publish(type, properties) {
    for (const hook of this.hooks) {
      if (typeof hook?.event !== "function") continue;
      const running = (async () => hook.event({ event: { id: `evt_${Date.now()}`, type, properties } }))()
        .catch((error) => this.recorder.record("error", { where: type, message: String(error?.message ?? error) }));
      this.recorder.track(running);
    }
  }

  async describeTool(name, definition) {
    let parameters = {};
    try {
      parameters = this.z.toJSONSchema(this.z.object(definition.args ?? {}), { io: "input", unrepresentable: "any" });
      delete parameters.$schema;
    } catch (error) {
      this.recorder.record("error", { where: `tool ${name}`, message: `args are not a zod shape: ${error?.message ?? error}` });
    }
    const output = await this.trigger("tool.definition", { toolID: name },
      { description: definition.description ?? "", parameters });
    return { name, description: String(output.description ?? ""), parameters: JSON.parse(JSON.stringify(output.parameters ?? {})) };
  }

  async load(request) {
    if (this.fake) throw new OpError("bad_request", "the plugin is already loaded");
    const env = loadEnv(request);
    const file = typeof request.options?.plugin === "string" ? path.resolve(request.options.plugin) : pluginFile();
    if (!file) throw new OpError("bad_request", "no plugin file: start the host with --plugin FILE");
    if (!fs.existsSync(file)) throw new OpError("bad_request", `plugin file not found: ${file}`);
    replaceEnvironment(env);
    startObserving({ host: [import.meta.dirname, nodeModules], bridge: [path.dirname(file)] });
    if (request.cwd) process.chdir(String(request.cwd));
    const toolModule = await import(pathToFileURL(entryFile("@opencode-ai/plugin/tool", nodeModules)).href);
    this.z = toolModule.tool.schema;
    const loading = new FakeOpenCode(this.recorder);
    const loaded = await runPlugins(file, loading.input(process.cwd()), request.options?.plugin_options);
    this.fake = loading;
    this.hooks = loaded.filter((hook) => hook && typeof hook === "object");
    await this.registerHooks();
    const events = [...new Set(this.hooks.flatMap((hook) => Object.keys(hook).filter((key) => key !== "tool")))];
    return { tools: [...this.tools.keys()], commands: Object.keys(this.commands()), events };
  }

  /** One merged config object, handed to every hook object's `config` in turn (OpenCode's
   * order), then the commands it declares and the hooks' tools, each recorded. */
  async registerHooks() {
    this.config = { command: {} };
    for (const hook of this.hooks) {
      try {
        await hook.config?.(this.config);
      } catch (error) {
        this.recorder.record("error", { where: "config", message: String(error?.message ?? error) });
      }
    }
    for (const [name, entry] of Object.entries(this.commands())) {
      this.recorder.record("command_registered", { name, description: String(entry?.description ?? "") });
    }
    this.tools = new Map();
    for (const hook of this.hooks) {
      for (const [name, definition] of Object.entries(hook.tool ?? {})) {
        if (!definition || typeof definition.execute !== "function") continue;
        this.tools.set(name, definition);
        this.recorder.record("tool_registered", await this.describeTool(name, definition));
      }
    }
  }

  async setSession(request) {
    const loaded = this.requireLoaded();
    return { entries: loaded.setSession(Array.isArray(request.messages) ? request.messages : []) };
  }

  async dispose() {
    if (this.shutDown) return;
    this.shutDown = true;
    this.publish("server.instance.disposed", { directory: process.cwd() });
    this.fake.abort.abort();
    for (const hook of this.hooks) {
      try {
        await hook.dispose?.();
      } catch (error) {
        this.recorder.record("error", { where: "dispose", message: String(error?.message ?? error) });
      }
    }
  }

  async beforeAgentStart(payload) {
    this.prompts += 1;
    const messageID = `msg_prompt_${this.prompts}`;
    const prompt = typeof payload.prompt === "string" ? payload.prompt : "";
    const parts = [{ id: `prt_prompt_${this.prompts}`, sessionID: SESSION_ID, messageID, type: "text", text: prompt }];
    const model = { providerID: "palace-conformance", modelID: "fake" };
    const output = { message: { id: messageID, sessionID: SESSION_ID, role: "user", time: { created: Date.now() },
      agent: "build", model }, parts };
    await this.trigger("chat.message", { sessionID: SESSION_ID, agent: "build", model, messageID }, output);
    const messages = [];
    for (const part of output.parts.slice(1)) {
      if (part?.type !== "text") continue;
      const injected = { custom_type: typeof part.metadata?.customType === "string" ? part.metadata.customType : null,
        content: String(part.text ?? "") };
      this.recorder.record("injected", injected);
      messages.push(injected);
    }
    const original = typeof payload.systemPrompt === "string" ? payload.systemPrompt : "";
    const system = await this.trigger("experimental.chat.system.transform", { sessionID: SESSION_ID, model },
      { system: original ? [original] : [] });
    const joined = system.system.join("\n");
    return joined === original ? { messages } : { messages, system_prompt: joined };
  }

  async event(request) {
    this.requireLoaded();
    if (typeof request.name !== "string") throw new OpError("bad_request", "event needs 'name'");
    const payload = request.payload && typeof request.payload === "object" ? request.payload : {};
    switch (request.name) {
      case "session_start": {
        // OpenCode announces a session when it is created: a new one, or a fork (with its
        // parent); resuming a session or reloading announces nothing
        const reason = payload.reason ?? "startup";
        if (!["startup", "new", "fork"].includes(reason)) return null;
        const parent = reason === "fork" ? { parentID: `${SESSION_ID}_parent` } : {};
        this.publish("session.created", { info: { id: SESSION_ID, directory: process.cwd(), title: "palace-conformance",
          ...parent, time: { created: Date.now(), updated: Date.now() } } });
        return null;
      }
      case "before_agent_start":
        return this.beforeAgentStart(payload);
      case "agent_settled":
        // OpenCode has one "the session went idle" moment: its session loop ends (nothing more
        // queued, pi's agent_settled) and `SessionStatus.set(idle)` publishes `session.status`
        // (idle), then `session.idle`, once (docs/typescript-hosts.md)
        this.publish("session.status", { sessionID: SESSION_ID, status: { type: "idle" } });
        this.publish("session.idle", { sessionID: SESSION_ID });
        return null;
      case "agent_end":
        // the end of one run with more queued: OpenCode's loop goes on to the queued message
        // and announces nothing a plugin could tell apart from a busy session
        return null;
      case "session_shutdown":
        await this.dispose();
        return null;
      default:
        return null; // no OpenCode hook for this pi event: nothing reaches the plugin
    }
  }

  async listTools() {
    this.requireLoaded();
    const described = [];
    for (const [name, definition] of this.tools) described.push(await this.describeTool(name, definition));
    return described;
  }

  async callTool(request) {
    const loaded = this.requireLoaded();
    const name = request.name;
    const { tool: definition, input } = toolCall(request, this.tools);
    const params = input;
    if (request.validate !== false) {
      const checked = this.z.object(definition.args ?? {}).safeParse(input);
      if (!checked.success) {
        const problems = checked.error.issues.map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`);
        const text = `The ${name} tool was called with invalid arguments: ${problems.join("; ")}`;
        return { content: [{ type: "text", text }], is_error: true, validation: problems };
      }
      // OpenCode (1.14.49 on) checks a plugin tool's arguments with its zod shape as a predicate
      // and hands `execute` the arguments as the model sent them: undeclared keys are not stripped
    }
    const callID = `call-${request.id}`;
    const before = { args: params };
    try {
      await this.trigger("tool.execute.before", { tool: name, sessionID: SESSION_ID, callID }, before);
    } catch (error) {
      const text = String(error?.message ?? error);
      return { content: [{ type: "text", text }], is_error: true, blocked: true };
    }
    const context = { sessionID: SESSION_ID, messageID: `msg_call_${request.id}`, agent: "build",
      directory: process.cwd(), worktree: process.cwd(), abort: loaded.abort.signal,
      metadata: () => undefined, ask: async () => undefined };
    let outcome;
    try {
      outcome = await definition.execute(before.args, context);
    } catch (error) {
      throw classifyOpenCode(error);
    }
    const result = typeof outcome === "string" ? { title: "", output: outcome, metadata: {} }
      : { title: outcome?.title ?? "", output: String(outcome?.output ?? ""), metadata: outcome?.metadata ?? {} };
    await this.trigger("tool.execute.after", { tool: name, sessionID: SESSION_ID, callID, args: before.args }, result);
    // OpenCode's ToolResult has no error flag; a plugin that relays an MCP `isError` result says so in metadata
    return { content: [{ type: "text", text: String(result.output) }], is_error: result.metadata?.isError === true };
  }

  commands() {
    return this.config.command && typeof this.config.command === "object" ? this.config.command : {};
  }

  /**
   * A slash command as OpenCode runs one: its config template with `$ARGUMENTS` (and `$1`..`$n`)
   * filled in as one text part, `command.execute.before` on that part list, then the parts sent
   * as the user's message (a turn starts: pi's sendUserMessage).
   */
  async command(request) {
    this.requireLoaded();
    const name = String(request.name ?? "");
    const entry = Object.hasOwn(this.commands(), name) ? this.commands()[name] : undefined;
    if (!entry || typeof entry.template !== "string") {
      throw new OpError("no_such_command", `no command registered as ${JSON.stringify(name)} (none in the config the plugins left)`);
    }
    const raw = typeof request.args === "string" ? request.args : "";
    const words = raw.split(/\s+/).filter(Boolean);
    const text = entry.template.replaceAll("$ARGUMENTS", raw).replace(/\$(\d+)/g, (_, n) => words[Number(n) - 1] ?? "");
    const output = { parts: [{ type: "text", text }] };
    await this.trigger("command.execute.before", { command: name, sessionID: SESSION_ID, arguments: raw }, output);
    const content = partsText(output.parts);
    this.recorder.record("user_message", { content, deliver_as: null });
    return null;
  }

  async shutdown(request) {
    if (this.fake) await this.dispose();
    return childrenAfter(request);
  }

  async reload() {
    throw new OpError("bad_request", "OpenCode V1 server plugins cannot be reloaded (no /reload in OpenCode)");
  }

  async close() {
    if (this.fake && !this.shutDown) {
      await Promise.race([this.dispose(), new Promise((resolve) => setTimeout(resolve, EXIT_SHUTDOWN_MS))]);
    }
    await stopChildren();
  }
}

const pluginFile = () => (typeof args.plugin === "string" ? path.resolve(args.plugin) : undefined);

/** Import the plugin file (jiti without a module cache) and run each plugin function it
 * exports on OpenCode's input: their hook objects, in order. */
async function runPlugins(file, input, pluginOptions) {
  const { createJiti } = requireDep("jiti", nodeModules);
  if (typeof args["cache-dir"] === "string") useCodeCache(path.join(args["cache-dir"], "v8"));
  const jiti = createJiti(import.meta.url, { moduleCache: false, alias: aliases(),
    ...(typeof args["cache-dir"] === "string" ? { fsCache: args["cache-dir"] } : {}) });
  let module;
  try {
    module = await jiti.import(file);
  } catch (error) {
    throw new OpError("exception", `loading ${path.basename(file)} failed: ${error?.message ?? error}`);
  }
  const loaded = [];
  try {
    for (const plugin of pluginFunctions(module, file)) {
      try {
        loaded.push(await plugin(input, pluginOptions));
      } catch (error) {
        throw new OpError("exception", `${path.basename(file)}'s plugin function threw: ${error?.message ?? error}`);
      }
    }
  } finally {
    keepCodeCache();
  }
  return loaded;
}

function makeOps(recorder) {
  // OpenCode hands a plugin no exec of its own (`$` is Bun's shell, which cannot bound a run):
  // a program the plugin runs for its output is observed and recorded as pi's `exec` records it
  // a run in flight is the plugin's background work, which `settle` waits for (as the reference
  // host drains its bridge's): a feed's prepare started by session.idle ends inside its settle
  observeProgramRuns((run) => recorder.record("exec", run), (ended) => recorder.track(ended));
  return opsOf(new OpenCodeOps(recorder), recorder);
}

/** A pooled host's head start: jiti, which every load imports. */
async function preload() {
  requireDep("jiti", nodeModules);
}

await serve({ protocolFd: Number(args["protocol-fd"] ?? 1), makeOps, preload });
