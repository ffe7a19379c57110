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
