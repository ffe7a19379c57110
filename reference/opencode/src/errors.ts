// What a palace call can fail with. The names and texts are what hosts classify by
// (DRIVER.md error kinds): a timeout says "timed out", an unavailable palace says "unavailable",
// a dead child "connection closed"; a JSON-RPC error from the palace keeps its numeric `code`,
// its message and its `data` (TOOL-04).

export class PalaceTimeout extends Error {
  override name = "PalaceTimeoutError";
}

export class PalaceUnavailable extends Error {
  override name = "PalaceUnavailableError";
  constructor(detail: string) {
    super(`mempalace-mcp unavailable: ${detail}`);
  }
}

export class PalaceConnectionClosed extends Error {
  override name = "PalaceConnectionClosedError";
  constructor(detail: string) {
    super(`connection closed (${detail})`);
  }
}

export class PalaceToolError extends Error {
  override name = "PalaceToolError";
  readonly code: number;
  readonly data: unknown;
  constructor(code: number, message: string, data: unknown) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

/** Any error's text, for log lines. */
export function why(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export const REDACTED = "<redacted>";

/** `value` with every secret replaced by `<redacted>`, at any depth (HTTP-01: a palace that echoes the token). */
export function redact<T>(value: T, secrets: readonly string[]): T {
  const live = secrets.filter((secret) => secret !== "");
  if (live.length === 0) return value;
  const walk = (item: unknown): unknown => {
    if (typeof item === "string") return live.reduce((text, secret) => text.split(secret).join(REDACTED), item);
    if (Array.isArray(item)) return item.map(walk);
    if (item && typeof item === "object") {
      return Object.fromEntries(Object.entries(item).map(([key, inner]) => [walk(key) as string, walk(inner)]));
    }
    return item;
  };
  return walk(value) as T;
}
