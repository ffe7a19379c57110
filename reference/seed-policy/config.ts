/**
 * Every environment knob of the seed bridge with the seed's default, read once at load from a
 * snapshot of the environment (LIFE-03: changing the environment later changes nothing), shared by
 * the TypeScript copies. A malformed value (not an integer, negative) falls back to the default
 * with one warning naming the variable (KNOB-02), as the Python reference does
 * (reference/palace_bridge/config.py). The knobs beyond the seed's are named in its style
 * (docs/choices.md).
 */

export type Env = Readonly<Record<string, string | undefined>>;

/** MEMPALACE_SESSION_PREAMBLE: one tool call made first on every new child or session (STDIO/HTTP-05). */
export interface Preamble {
  tool: string;
  arguments: Record<string, unknown>;
}

export interface SeedConfig {
  remoteUrl?: string;
  remoteToken?: string;
  serverCommand: string;
  timeoutMs: number;
  initTimeoutMs: number;
  maxRespawns: number;
  respawnBackoffMs: number;
  debug: boolean;
  killGraceMs: number;
  keepaliveMs: number;
  preamble?: Preamble;
  connectRetries: number;
  connectBackoffMs: number;
  agentName: string;
  device?: string;
  feed: boolean;
  feedBin: string;
  feedWing: string;
  feedDebounceMs: number;
  feedPrepareTimeoutMs: number;
  feedMineTimeoutMs: number;
  sshTarget?: string;
  mailbox: boolean;
  mailboxPollMs: number;
  warnings: string[];
}

export const DEFAULTS = {
  serverCommand: "mempalace-mcp",
  timeoutMs: 60000,
  initTimeoutMs: 300000,
  maxRespawns: 2,
  respawnBackoffMs: 1000,
  killGraceMs: 2000,
  keepaliveMs: 0,
  connectRetries: 2,
  connectBackoffMs: 250,
  agentName: "pi",
  feedBin: "mempalace-pi-session",
  feedWing: "wing_conversations",
  feedDebounceMs: 600000,
  feedPrepareTimeoutMs: 120000,
  feedMineTimeoutMs: 30000,
  mailboxPollMs: 300000,
} as const;

export function isRecord(value: unknown): value is Record<string, unknown> {
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

export function readConfig(env: Env): SeedConfig {
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
    serverCommand: text("MEMPALACE_MCP_BIN") ?? DEFAULTS.serverCommand,
    timeoutMs: integer("MEMPALACE_MCP_TIMEOUT_MS", DEFAULTS.timeoutMs),
    initTimeoutMs: integer("MEMPALACE_MCP_INIT_TIMEOUT_MS", DEFAULTS.initTimeoutMs),
    maxRespawns: integer("MEMPALACE_MCP_MAX_RESPAWNS", DEFAULTS.maxRespawns),
    respawnBackoffMs: integer("MEMPALACE_MCP_RESPAWN_BACKOFF_MS", DEFAULTS.respawnBackoffMs),
    debug: env["MEMPALACE_EXT_DEBUG"] === "1",
    killGraceMs: integer("MEMPALACE_MCP_KILL_GRACE_MS", DEFAULTS.killGraceMs),
    keepaliveMs: integer("MEMPALACE_MCP_KEEPALIVE_MS", DEFAULTS.keepaliveMs),
    preamble,
    connectRetries: integer("MEMPALACE_REMOTE_CONNECT_RETRIES", DEFAULTS.connectRetries),
    connectBackoffMs: integer("MEMPALACE_REMOTE_CONNECT_BACKOFF_MS", DEFAULTS.connectBackoffMs),
    agentName: text("MEMPALACE_AGENT_NAME") ?? DEFAULTS.agentName,
    device: text("MEMPALACE_PI_DEVICE"),
    feed: flag("MEMPALACE_FEED", true),
    feedBin: text("MEMPALACE_FEED_BIN") ?? DEFAULTS.feedBin,
    feedWing: text("MEMPALACE_FEED_WING") ?? DEFAULTS.feedWing,
    feedDebounceMs: integer("MEMPALACE_FEED_DEBOUNCE_MS", DEFAULTS.feedDebounceMs),
    feedPrepareTimeoutMs: integer("MEMPALACE_FEED_PREPARE_TIMEOUT_MS", DEFAULTS.feedPrepareTimeoutMs),
    feedMineTimeoutMs: integer("MEMPALACE_FEED_MINE_TIMEOUT_MS", DEFAULTS.feedMineTimeoutMs),
    sshTarget: text("MEMPALACE_PI_SSH_TARGET"),
    mailbox: flag("MEMPALACE_MAILBOX", true),
    mailboxPollMs: integer("MEMPALACE_MAILBOX_POLL_MS", DEFAULTS.mailboxPollMs),
    warnings,
  };
}
