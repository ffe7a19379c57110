// Every environment knob of the seed bridge this copy reads, with the seed's default, read once at
// load from a snapshot of the environment (LIFE-03: changing the environment later changes nothing).
// A malformed value (not an integer, negative) falls back to the default with one warning naming
// the variable (KNOB-02), as the Python reference does (reference/palace_bridge/config.py).

/** MEMPALACE_SESSION_PREAMBLE: one tool call made first on every new child or session (STDIO/HTTP-05). */
export interface Preamble {
  tool: string;
  arguments: Record<string, unknown>;
}

export interface BridgeConfig {
  remoteUrl: string | undefined;
  remoteToken: string | undefined;
  serverCommand: string;
  timeoutMs: number;
  initTimeoutMs: number;
  maxRespawns: number;
  respawnBackoffMs: number;
  killGraceMs: number;
  debug: boolean;
  keepaliveMs: number;
  connectRetries: number;
  connectBackoffMs: number;
  agentName: string;
  device: string | undefined;
  preamble: Preamble | undefined;
  mailbox: boolean;
  mailboxPollMs: number;
  feed: boolean;
  feedBin: string;
  feedWing: string;
  feedDebounceMs: number;
  feedPrepareTimeoutMs: number;
  feedMineTimeoutMs: number;
  sshTarget: string | undefined;
  warnings: string[];
}

export type Env = Readonly<Record<string, string | undefined>>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `{"tool": name, "arguments": {...}}`, or undefined when malformed. */
export function parsePreamble(raw: string): Preamble | undefined {
  let data: unknown;
  try {
    data = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!isRecord(data) || typeof data["tool"] !== "string" || data["tool"] === "") return undefined;
  const args = data["arguments"] ?? {};
  if (!isRecord(args)) return undefined;
  return { tool: data["tool"], arguments: args };
}

/** The value quoted the way the Python copy's warning quotes it (repr), so every copy prints one text. */
export function pyRepr(value: string): string {
  const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
  const body = value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t");
  return quote + (quote === "'" ? body.replace(/'/g, "\\'") : body) + quote;
}

export function readConfig(env: Env): BridgeConfig {
  const warnings: string[] = [];
  const integer = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === "") return fallback;
    // as Python's int(): surrounding blanks and a sign allowed
    const trimmed = raw.trim();
    const value = /^[+-]?\d+$/.test(trimmed) ? Number(trimmed) : -1;
    if (!Number.isSafeInteger(value) || value < 0) {
      warnings.push(`mempalace: ignoring ${name}=${pyRepr(raw)} (expected a non-negative integer); using the default ${fallback}`);
      return fallback;
    }
    return value;
  };
  const text = (name: string): string | undefined => {
    const raw = env[name];
    return raw === undefined || raw === "" ? undefined : raw;
  };
  const flag = (name: string, fallback: boolean): boolean => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === "") return fallback;
    return !["0", "false", "no", "off"].includes(raw.trim());
  };
  let preamble: Preamble | undefined;
  const rawPreamble = text("MEMPALACE_SESSION_PREAMBLE");
  if (rawPreamble !== undefined) {
    preamble = parsePreamble(rawPreamble);
    if (preamble === undefined) {
      warnings.push('mempalace: ignoring MEMPALACE_SESSION_PREAMBLE (expected JSON {"tool": "<name>", "arguments": {...}}); no session preamble');
    }
  }
  return {
    remoteUrl: text("MEMPALACE_REMOTE_URL"),
    remoteToken: text("MEMPALACE_REMOTE_TOKEN"),
    serverCommand: text("MEMPALACE_MCP_BIN") ?? "mempalace-mcp",
    timeoutMs: integer("MEMPALACE_MCP_TIMEOUT_MS", 60000),
    initTimeoutMs: integer("MEMPALACE_MCP_INIT_TIMEOUT_MS", 300000),
    maxRespawns: integer("MEMPALACE_MCP_MAX_RESPAWNS", 2),
    respawnBackoffMs: integer("MEMPALACE_MCP_RESPAWN_BACKOFF_MS", 1000),
    killGraceMs: integer("MEMPALACE_MCP_KILL_GRACE_MS", 2000),
    debug: env["MEMPALACE_EXT_DEBUG"] === "1",
    keepaliveMs: integer("MEMPALACE_MCP_KEEPALIVE_MS", 0),
    connectRetries: integer("MEMPALACE_REMOTE_CONNECT_RETRIES", 2),
    connectBackoffMs: integer("MEMPALACE_REMOTE_CONNECT_BACKOFF_MS", 250),
    agentName: text("MEMPALACE_AGENT_NAME") ?? "pi",
    device: text("MEMPALACE_PI_DEVICE"),
    preamble,
    mailbox: flag("MEMPALACE_MAILBOX", true),
    mailboxPollMs: integer("MEMPALACE_MAILBOX_POLL_MS", 300000),
    feed: flag("MEMPALACE_FEED", true),
    feedBin: text("MEMPALACE_FEED_BIN") ?? "mempalace-pi-session",
    feedWing: text("MEMPALACE_FEED_WING") ?? "wing_conversations",
    feedDebounceMs: integer("MEMPALACE_FEED_DEBOUNCE_MS", 600000),
    feedPrepareTimeoutMs: integer("MEMPALACE_FEED_PREPARE_TIMEOUT_MS", 120000),
    feedMineTimeoutMs: integer("MEMPALACE_FEED_MINE_TIMEOUT_MS", 30000),
    sshTarget: text("MEMPALACE_PI_SSH_TARGET"),
    warnings,
  };
}
