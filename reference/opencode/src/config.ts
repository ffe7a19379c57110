// Every environment knob of the seed bridge this copy reads, with the seed's default, read once at
// load from a snapshot of the environment (LIFE-03: changing the environment later changes nothing).
// A malformed value (not an integer, negative) falls back to the default with one warning naming
// the variable (KNOB-02), as the Python reference does (reference/palace_bridge/config.py).

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
  warnings: string[];
}

export type Env = Readonly<Record<string, string | undefined>>;

export function readConfig(env: Env): BridgeConfig {
  const warnings: string[] = [];
  const integer = (name: string, fallback: number): number => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === "") return fallback;
    const value = /^\s*\d+\s*$/.test(raw) ? Number(raw.trim()) : -1;
    if (!Number.isSafeInteger(value) || value < 0) {
      warnings.push(`mempalace: ignoring ${name}=${JSON.stringify(raw)} (expected a non-negative integer); using the default ${fallback}`);
      return fallback;
    }
    return value;
  };
  const text = (name: string): string | undefined => {
    const raw = env[name];
    return raw === undefined || raw === "" ? undefined : raw;
  };
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
    warnings,
  };
}
