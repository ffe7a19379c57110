// A recording stand-in for pi's ExtensionAPI (`pi`) and ExtensionContext (`ctx`), pi 1.6.0 shape.
//
// It plays pi's part for one extension: keeps what the extension registered, records every
// host-visible effect in DRIVER.md shapes, and notes each part of the API the extension touched
// (`introspect.api_touched`) through Proxies. It runs no LLM and no TUI: `ctx.hasUI` is false,
// dialogs answer "no", and `sendMessage`/`sendUserMessage` only record what would be sent.

import { spawnInternal } from "./children.mjs";

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const childProcess = process.getBuiltinModule("node:child_process");
const os = process.getBuiltinModule("node:os");
const path = process.getBuiltinModule("node:path");

const SIGNALS = os.constants.signals;
const EXEC_FORCE_KILL_MS = 5000; // pi's exec sends SIGKILL this long after SIGTERM
const PROBES = new Set(["then", "toJSON", "constructor", "inspect", "asymmetricMatch", "$$typeof",
  "nodeType", "prototype", "length", "name"]);

/** The text of a message content (a string, or pi's content blocks). */
export function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => (typeof part === "string" ? part : part?.type === "text" ? part.text : ""))
      .filter((text) => text !== "").join("\n");
  }
  return content === undefined || content === null ? "" : String(content);
}

/** A registered schema as plain JSON Schema (TypeBox's Symbol markers dropped). */
export function plainSchema(schema) {
  if (schema === undefined) return undefined;
  try {
    return JSON.parse(JSON.stringify(schema));
  } catch {
    return schema;
  }
}

/** Records `prefix.name` for every property read on `target` (nested objects included). */
function touching(target, prefix, touched, nested = {}) {
  return new Proxy(target, {
    get(object, property, receiver) {
      if (typeof property !== "string" || PROBES.has(property)) return Reflect.get(object, property, receiver);
      const name = prefix ? `${prefix}.${property}` : property;
      if (!(property in object)) {
        touched.add(`${name} (missing)`);
        return undefined;
      }
      touched.add(name);
      const value = Reflect.get(object, property, receiver);
      if (nested[property] && value && typeof value === "object") {
        return touching(value, name, touched, nested[property] === true ? {} : nested[property]);
      }
      return value;
    },
  });
}

/** Run a program like pi's `exec`: no shell, output captured, timeout = SIGTERM then SIGKILL. */
export function runExec(command, args, { cwd, timeout, signal } = {}) {
  return new Promise((resolve) => {
    let child;
    try {
      child = spawnInternal(() => childProcess.spawn(command, args ?? [], {
        cwd, shell: false, stdio: ["ignore", "pipe", "pipe"], env: process.env,
      }));
    } catch (error) {
      resolve({ stdout: "", stderr: error.message, code: 1, killed: false, truncated: false });
      return;
    }
    let stdout = "";
    let stderr = "";
    let killed = false;
    let forceTimer;
    let timer;
    child.stdout.setEncoding("utf8").on("data", (text) => { stdout += text; });
    child.stderr.setEncoding("utf8").on("data", (text) => { stderr += text; });
    const kill = () => {
      if (killed) return;
      killed = true;
      child.kill("SIGTERM");
      forceTimer = setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      }, EXEC_FORCE_KILL_MS);
    };
    if (timeout && timeout > 0) timer = setTimeout(kill, timeout);
    if (signal) {
      if (signal.aborted) kill();
      else signal.addEventListener("abort", kill, { once: true });
    }
    let settled = false;
    const settle = (result) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(forceTimer);
      signal?.removeEventListener?.("abort", kill);
      resolve(result);
    };
    // pi 1.6's execCommand settles on the child's first `error` (a missing program: ENOENT) with
    // code 1 and the error's message as stderr; Node's own `close` code for it (-errno) never shows.
    child.on("error", (error) => {
      settle({ stdout, stderr: stderr || error.message, code: 1, killed, truncated: false });
    });
    child.on("close", (code, signalName) => {
      const exitCode = code ?? (signalName ? 128 + (SIGNALS[signalName] ?? 0) : 1);
      settle({ stdout, stderr, code: exitCode, killed, truncated: false });
    });
  });
}

/** A small event bus like `pi.events` (shared between extensions). */
function eventBus() {
  const handlers = new Map();
  return {
    on(channel, handler) {
      if (!handlers.has(channel)) handlers.set(channel, new Set());
      handlers.get(channel).add(handler);
      return () => handlers.get(channel)?.delete(handler);
    },
    emit(channel, data) {
      for (const handler of [...(handlers.get(channel) ?? [])]) {
        try {
          const result = handler(data);
          if (result && typeof result.catch === "function") result.catch(() => undefined);
        } catch {
          // a listener's failure is its own business, as on pi's bus
        }
      }
    },
  };
}

/**
 * The state of one loaded extension as pi would hold it, plus the recording `pi` and `ctx`
 * factories. `recorder` receives the effects; `flags` are `--flag` values (`getFlag`).
 */
export class FakePi {
  constructor({ recorder, flags = {}, extensionPath }) {
    this.recorder = recorder;
    this.flags = { ...flags };
    this.extensionPath = extensionPath;
    this.touched = new Set();
    this.handlers = new Map(); // event -> [handler]
    this.tools = new Map();
    this.activeTools = new Set();
    this.commands = new Map();
    this.entries = [];
    this.sessionFile = undefined;
    this.sessionName = undefined;
    this.model = { provider: "palace-conformance", id: "fake-model", name: "fake model", api: "none",
      reasoning: false, input: ["text"], contextWindow: 200000, maxTokens: 8192 };
    this.thinkingLevel = "off";
    this.events = eventBus();
    this.mcpServers = new Map();
    this.abort = new AbortController();
    this.api = touching(this.buildApi(), "", this.touched, { events: true });
  }

  sourceInfo() {
    return { path: this.extensionPath, source: "local", scope: "user", origin: "top-level",
      baseDir: this.extensionPath ? path.dirname(this.extensionPath) : undefined };
  }

  /** The `pi` an extension's factory is handed: what it registers, what it sends and appends
   * to the session, and the tools, model and MCP servers it reads or sets. */
  buildApi() {
    const record = (kind, fields) => this.recorder.record(kind, fields);
    return { ...registrationApi(this, record), ...sessionApi(this, record), ...runtimeApi(this) };
  }

  appendSessionEntry(entry) {
    const previous = this.entries.at(-1);
    this.entries.push({ id: `entry-${this.entries.length + 1}`, parentId: previous?.id ?? null,
      timestamp: new Date().toISOString(), ...entry });
  }

  /** Replace the session with pi AgentMessages (`set_session`). */
  setSession(messages, sessionFile) {
    this.entries = [];
    for (const message of messages) this.appendSessionEntry({ type: "message", message });
    this.sessionFile = sessionFile ?? undefined;
    return this.entries.length;
  }

  sessionManager() {
    const self = this;
    const header = () => ({ type: "session", version: 3, id: "palace-conformance-session",
      timestamp: new Date(0).toISOString(), cwd: process.cwd() });
    return {
      getCwd: () => process.cwd(),
      getSessionDir: () => (self.sessionFile ? path.dirname(self.sessionFile)
        : path.join(os.homedir(), ".pi", "agent", "sessions")),
      getSessionId: () => "palace-conformance-session",
      getSessionFile: () => self.sessionFile,
      getLeafId: () => self.entries.at(-1)?.id ?? null,
      getLeafEntry: () => self.entries.at(-1),
      getEntry: (id) => self.entries.find((entry) => entry.id === id),
      getLabel: () => undefined,
      getBranch: () => [...self.entries],
      buildContextEntries: () => [...self.entries],
      buildSessionProjection: () => ({ entries: [...self.entries] }),
      getHeader: header,
      getEntries: () => [...self.entries],
      getTree: () => self.entries.map((entry) => ({ entry, children: [] })),
      getSessionName: () => self.sessionName,
    };
  }

  ui() {
    const record = (kind, fields) => this.recorder.record(kind, fields);
    const theme = new Proxy({}, { get: () => (text) => text });
    return {
      notify(message, level = "info") {
        record("notify", { level, message: String(message) });
      },
      select: async () => undefined,
      confirm: async () => false,
      input: async () => undefined,
      editor: async () => undefined,
      custom: async () => undefined,
      onTerminalInput: () => () => undefined,
      setStatus() {},
      setWorkingMessage() {},
      setWorkingVisible() {},
      setWorkingIndicator() {},
      setHiddenThinkingLabel() {},
      setWidget() {},
      setFooter() {},
      setHeader() {},
      setTitle() {},
      pasteToEditor() {},
      setEditorText() {},
      getEditorText: () => "",
      addAutocompleteProvider() {},
      setEditorComponent() {},
      getEditorComponent: () => undefined,
      theme,
      getAllThemes: () => [],
    };
  }

  /** A recording `ctx`; `extra` adds the command- or tool-only members. */
  context(extra = {}) {
    const ctx = {
      ui: this.ui(),
      mode: "json",
      hasUI: false,
      cwd: process.cwd(),
      sessionManager: this.sessionManager(),
      modelRegistry: { getAll: () => [this.model], getAvailable: async () => [this.model],
        find: () => this.model, getApiKey: async () => undefined },
      model: this.model,
      scopedModels: [],
      thinkingLevel: this.thinkingLevel,
      isIdle: () => true,
      isProjectTrusted: () => true,
      signal: this.abort.signal,
      abort() {},
      hasPendingMessages: () => false,
      shutdown() {},
      getContextUsage: () => undefined,
      compact() {},
      getSystemPrompt: () => "",
      ...extra,
    };
    return touching(ctx, "ctx", this.touched, { ui: true, sessionManager: true, modelRegistry: true });
  }

  commandContext() {
    return this.context({
      waitForIdle: async () => undefined,
      newSession: async () => ({ cancelled: true }),
      fork: async () => ({ cancelled: true }),
      navigateTree: async () => ({ cancelled: true }),
      switchSession: async () => ({ cancelled: true }),
      reload: async () => undefined,
    });
  }

  /** Fire `event` at its handlers in order; a throwing handler becomes an `error` effect. */
  async emit(event, payload = {}, ctx = this.context()) {
    const results = [];
    const current = { ...payload };
    for (const handler of [...(this.handlers.get(event) ?? [])]) {
      try {
        const result = await handler({ ...current, type: event }, ctx);
        if (result === undefined || result === null) continue;
        results.push(result);
        // pi chains the system prompt: a later handler sees an earlier one's override
        if (typeof result.systemPrompt === "string") current.systemPrompt = result.systemPrompt;
      } catch (error) {
        this.recorder.record("error", { where: event, message: `${error?.name ?? "Error"}: ${error?.message ?? error}` });
      }
    }
    return results;
  }
}

/** The part of `pi` an extension registers its tools, commands, flags and renderers with. */
function registrationApi(self, record) {
  return {
    on(event, handler) {
      if (!self.handlers.has(event)) self.handlers.set(event, []);
      self.handlers.get(event).push(handler);
      return () => {
        const list = self.handlers.get(event) ?? [];
        const index = list.indexOf(handler);
        if (index >= 0) list.splice(index, 1);
      };
    },
    registerTool(tool) {
      if (!tool || typeof tool.name !== "string") throw new TypeError("registerTool needs a tool with a name");
      self.tools.set(tool.name, tool);
      if (tool.defaultActive !== false) self.activeTools.add(tool.name);
      record("tool_registered", { name: tool.name, description: tool.description ?? "",
        parameters: plainSchema(tool.parameters) ?? { type: "object" } });
    },
    registerCommand(name, options = {}) {
      self.commands.set(name, { name, ...options });
      record("command_registered", { name, description: options.description ?? "" });
    },
    registerShortcut() {},
    registerFlag(name, options = {}) {
      if (!(name in self.flags) && options.default !== undefined) self.flags[name] = options.default;
    },
    getFlag(name) {
      return self.flags[name];
    },
    registerMessageRenderer() {},
    registerMarkdownTransformer() {},
    registerEntryRenderer() {},
    registerToolRenderer() {},
  };
}

/** The part of `pi` that sends messages, appends to the session and runs commands. */
function sessionApi(self, record) {
  return {
    sendMessage(message = {}, options = {}) {
      record("message", {
        custom_type: message.customType ?? null, content: contentText(message.content),
        display: message.display ?? true, details: message.details ?? null,
        deliver_as: options.deliverAs ?? null, trigger_turn: Boolean(options.triggerTurn),
      });
      self.appendSessionEntry({ type: "custom_message", customType: message.customType,
        content: message.content, display: message.display, details: message.details });
    },
    sendUserMessage(content, options = {}) {
      record("user_message", { content: contentText(content), deliver_as: options.deliverAs ?? null });
      self.appendSessionEntry({ type: "message",
        message: { role: "user", content: typeof content === "string" ? [{ type: "text", text: content }] : content,
          timestamp: Date.now() } });
    },
    appendEntry(customType, data) {
      self.appendSessionEntry({ type: "custom", customType, data });
    },
    setSessionName(name) {
      self.sessionName = name;
    },
    getSessionName() {
      return self.sessionName;
    },
    setLabel() {},
    async exec(command, args = [], options = {}) {
      const running = runExec(command, args, { cwd: options.cwd ?? process.cwd(),
        timeout: options.timeout, signal: options.signal });
      // a run in flight is the bridge's background work: `settle` waits for it, as the reference
      // host's settle drains its bridge's (a feed's prepare started by agent_settled, say)
      self.recorder.track(running);
      const result = await running;
      record("exec", { argv: [command, ...args], exit_code: result.code, timed_out: result.killed });
      return result;
    },
  };
}

/** The part of `pi` that reads and sets tools, settings, the model and MCP servers. */
function runtimeApi(self) {
  return {
    getActiveTools() {
      return [...self.activeTools];
    },
    getAllTools() {
      return [...self.tools.values()].map((tool) => ({
        name: tool.name, description: tool.description, parameters: tool.parameters,
        promptGuidelines: tool.promptGuidelines, exposure: tool.exposure ?? "direct",
        sourceInfo: self.sourceInfo(),
      }));
    },
    getSettings() {
      return {};
    },
    setActiveTools(names) {
      self.activeTools = new Set((names ?? []).filter((name) => self.tools.has(name)));
    },
    getCommands() {
      return [...self.commands.values()].map((command) => ({
        name: command.name, description: command.description, source: "extension",
        sourceInfo: self.sourceInfo(),
      }));
    },
    async setModel(model) {
      if (model) self.model = model;
      return true;
    },
    getThinkingLevel() {
      return self.thinkingLevel;
    },
    setThinkingLevel(level) {
      self.thinkingLevel = level;
    },
    registerProvider() {},
    unregisterProvider() {},
    registerMcpServer(name, config) {
      self.mcpServers.set(name, { name, config, sourceInfo: self.sourceInfo() });
    },
    unregisterMcpServer(name) {
      self.mcpServers.delete(name);
    },
    getMcpServers() {
      return [...self.mcpServers.values()];
    },
    registerVirtualModel() {},
    unregisterVirtualModel() {},
    events: self.events,
  };
}
