// officialsdk: a pi <-> MemPalace bridge of the "built on the official MCP SDK" family.
//
// It talks MCP through `@modelcontextprotocol/sdk` (Client + StdioClientTransport) as most
// third-party bridges do, and leaves the transport's environment at the SDK's DEFAULT: the child
// `mempalace-mcp` gets only HOME, LOGNAME, PATH, SHELL, TERM and USER from the host, never the
// host's other variables. It reads the seed's knobs itself (MEMPALACE_MCP_TIMEOUT_MS,
// MEMPALACE_MCP_INIT_TIMEOUT_MS, MEMPALACE_MCP_MAX_RESPAWNS, MEMPALACE_MCP_RESPAWN_BACKOFF_MS,
// MEMPALACE_EXT_DEBUG), registers every palace tool with its schema unchanged, bounds every
// request with the SDK's own timeout, respawns a dead child with a doubling backoff within a
// budget (reset by any answer), and closes the client (stdin, then SIGTERM, then SIGKILL) at
// shutdown. A JSON-RPC error reaches the agent as the SDK's McpError (code, message, data). The
// child's stderr is piped and drained, forwarded to the host's stderr only with MEMPALACE_EXT_DEBUG=1.
// Two of its defects come with the SDK (LIFE-06, TOOL-06): a bridge on its defaults has them.
//
// PLANTED DEFECTS:
// STDIO-02: a request the SDK timed out leaves its child running: the stalled child is never killed and the next call is sent to it again
// LIFE-06: the child is stopped the SDK's way (Client.close: stdin, SIGTERM, SIGKILL to its pid alone), so a grandchild in its group outlives it
// TOOL-06: answers are matched to requests as the SDK does, by Number(id): an answer with id "2" (a string) is taken for request 2

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Type } from "typebox";

const NO_TIMEOUT_MS = 2_147_483_647; // setTimeout's largest delay: "0 disables the timeout"
const KILL_GRACE_MS = 2_000;

interface Settings {
  toolTimeoutMs: number;
  initTimeoutMs: number;
  maxRespawns: number;
  backoffMs: number;
  debug: boolean;
}

function intEnv(name: string, fallback: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (Number.isInteger(value) && value >= 0) return value;
  console.error(`officialsdk: ignoring ${name}=${JSON.stringify(raw)}; using ${fallback}`);
  return fallback;
}

function readSettings(): Settings {
  return {
    toolTimeoutMs: intEnv("MEMPALACE_MCP_TIMEOUT_MS", 60_000),
    initTimeoutMs: intEnv("MEMPALACE_MCP_INIT_TIMEOUT_MS", 300_000),
    maxRespawns: intEnv("MEMPALACE_MCP_MAX_RESPAWNS", 2),
    backoffMs: intEnv("MEMPALACE_MCP_RESPAWN_BACKOFF_MS", 1_000),
    debug: process.env.MEMPALACE_EXT_DEBUG === "1",
  };
}

const bounded = (ms: number) => (ms === 0 ? NO_TIMEOUT_MS : ms);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface PalaceTool { name: string; description?: string; inputSchema: Record<string, unknown> }

/** One connected SDK client and its child. */
class Connection {
  closed = false;
  pid: number | null = null; // kept: the SDK forgets its process when it starts closing
  readonly done: Promise<void>;
  private markClosed!: () => void;

  constructor(readonly client: Client, readonly transport: StdioClientTransport) {
    this.done = new Promise((resolve) => { this.markClosed = resolve; });
    client.onclose = () => { this.closed = true; this.markClosed(); };
  }

  /** Kills the child: SIGTERM, SIGKILL after a grace if it is still there, then the client. */
  async kill(): Promise<void> {
    const pid = this.pid ?? this.transport.pid;
    if (pid !== null && !this.closed) {
      try { process.kill(pid, "SIGTERM"); } catch { /* gone */ }
      const exited = await Promise.race([this.done.then(() => true), sleep(KILL_GRACE_MS).then(() => false)]);
      if (!exited) {
        try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
      }
    }
    await this.client.close().catch(() => undefined);
  }
}

/** The supervised palace: connected on demand, respawned within a budget, latched once spent. */
class Palace {
  tools: PalaceTool[] = [];
  private connection?: Connection;
  private connecting?: Promise<Connection>;
  private respawns = 0;
  private started = false;
  private latched?: string;
  private stopped = false;

  constructor(private readonly settings: Settings) {}

  async call(name: string, args: Record<string, unknown>) {
    const connection = await this.ready();
    try {
      const result = await connection.client.callTool({ name, arguments: args }, undefined,
        { timeout: bounded(this.settings.toolTimeoutMs) });
      this.respawns = 0; // any answer proves the server alive
      return result;
    } catch (error) {
      // (PLANTED STDIO-02: a timeout leaves the child as it is; only a closed one is replaced)
      if (connection.closed && connection === this.connection) this.connection = undefined;
      throw error;
    }
  }

  async ready(): Promise<Connection> {
    if (this.connection && !this.connection.closed) return this.connection;
    this.connection = undefined;
    this.connecting ??= this.start().finally(() => { this.connecting = undefined; });
    return this.connecting;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const connection = this.connection;
    this.connection = undefined;
    if (connection) await connection.client.close().catch(() => undefined);
  }

  private async start(): Promise<Connection> {
    let why = "";
    for (;;) {
      if (this.stopped) throw new Error("palace unavailable: the session has ended");
      if (this.latched) throw new Error(`palace unavailable: ${this.latched}`);
      if (this.started) {
        if (this.respawns >= this.settings.maxRespawns) {
          this.latched = `gave up after ${this.settings.maxRespawns} respawn(s)${why ? `; last failure: ${why}` : ""}`;
          continue;
        }
        this.respawns += 1;
        await sleep(this.settings.backoffMs * 2 ** (this.respawns - 1));
        if (this.stopped) continue;
      }
      this.started = true;
      // the SDK's default environment (no `env`); stderr piped and drained
      const transport = new StdioClientTransport({ command: "mempalace-mcp", args: [], stderr: "pipe" });
      transport.stderr?.on("data", (chunk: Buffer) => { if (this.settings.debug) process.stderr.write(chunk); });
      const client = new Client({ name: "officialsdk-bridge", version: "1.0.0" }, { capabilities: {} });
      const connection = new Connection(client, transport);
      try {
        const budget = bounded(this.settings.initTimeoutMs);
        const deadline = Date.now() + budget;
        const connecting = client.connect(transport, { timeout: budget });
        connection.pid = transport.pid; // spawned synchronously inside connect
        await connecting;
        const tools: PalaceTool[] = [];
        let cursor: string | undefined;
        do {
          const page = await client.listTools(cursor ? { cursor } : undefined,
            { timeout: Math.max(1, deadline - Date.now()) });
          tools.push(...(page.tools as PalaceTool[]));
          cursor = page.nextCursor;
        } while (cursor);
        this.tools = tools;
      } catch (error) {
        why = (error as Error).message;
        if ((error as NodeJS.ErrnoException).code === "ENOENT") this.latched = `mempalace-mcp not found (${why})`;
        await connection.kill();
        continue;
      }
      if (this.stopped) {
        await client.close().catch(() => undefined);
        continue;
      }
      this.respawns = 0;
      this.connection = connection;
      return connection;
    }
  }
}

export default function officialsdk(pi: ExtensionAPI) {
  const settings = readSettings();
  const palace = new Palace(settings);
  let registered = false;

  pi.on("session_start", async () => {
    if (registered) return;
    try {
      await palace.ready();
    } catch (error) {
      console.error(`officialsdk: mempalace-mcp unavailable (${(error as Error).message}); continuing without palace tools`);
      return;
    }
    registered = true;
    for (const tool of palace.tools) {
      pi.registerTool({
        name: tool.name,
        label: tool.name,
        description: tool.description ?? "",
        parameters: Type.Unsafe(tool.inputSchema),
        async execute(_id, params) {
          const result = await palace.call(tool.name, params as Record<string, unknown>);
          return { content: (result.content ?? []) as never, details: undefined, isError: Boolean(result.isError) };
        },
      });
    }
  });

  pi.on("session_shutdown", async () => {
    await palace.stop();
  });
}
