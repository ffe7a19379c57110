/**
 * Typed failures of the palace client, so a host can tell why a call failed. Each message stands on
 * its own; a host that maps errors by text (the kit's extension host does, after name and shape)
 * reads the same kind the Python copy's classes give. None ever holds the remote token: every
 * error leaves the client through redactError.
 */

export const REDACTED = "<redacted>";

export class PalaceError extends Error {
  detail = "";
}

export class PalaceTimeout extends PalaceError {
  readonly method: string;
  readonly timeoutMs: number;
  constructor(method: string, timeoutMs: number) {
    super(`mempalace request ${method} timed out after ${timeoutMs} ms`);
    this.name = "PalaceTimeout";
    this.method = method;
    this.timeoutMs = timeoutMs;
  }
}

export class PalaceUnavailable extends PalaceError {
  constructor(detail: string) {
    super(`mempalace unavailable: ${detail}`);
    this.name = "PalaceUnavailable";
    this.detail = detail;
  }
}

/** The server answered with a JSON-RPC error: code, message and data kept (TOOL-04). */
export class PalaceToolError extends PalaceError {
  readonly code: number;
  readonly data: unknown;
  readonly method: string;
  constructor(code: number, message: string, data?: unknown, method = "") {
    super(message);
    this.name = "PalaceToolError";
    this.code = code;
    this.data = data;
    this.method = method;
  }
}

/** 401 from the remote palace: re-initializing would not help (HTTP-08). */
export class PalaceAuthError extends PalaceError {
  readonly status: number;
  constructor(status: number, detail = "") {
    const text = `mempalace refused the credentials (HTTP ${status}); check MEMPALACE_REMOTE_TOKEN`;
    super(detail ? `${text}: ${detail}` : text);
    this.name = "PalaceAuthError";
    this.status = status;
    this.detail = detail;
  }
}

/** The remote palace forgot the session again right after it was replaced (HTTP-04). */
export class PalaceSessionLost extends PalaceError {
  constructor(detail = "") {
    const text = "mempalace session lost: the server answered 404 again after a fresh initialize";
    super(detail ? `${text} (${detail})` : text);
    this.name = "PalaceSessionLost";
    this.detail = detail;
  }
}

/** The connection died under an in-flight request: child exit or reset (STDIO-12). */
export class PalaceConnectionClosed extends PalaceError {
  constructor(detail: string) {
    super(`mempalace connection closed: ${detail}`);
    this.name = "PalaceConnectionClosed";
    this.detail = detail;
  }
}

export class PalaceProtocolError extends PalaceError {
  constructor(detail: string) {
    super(`mempalace protocol error: ${detail}`);
    this.name = "PalaceProtocolError";
    this.detail = detail;
  }
}

/** An HTTP error status; the JSON-RPC error in the body, if any, kept as `rpcError` and its
 * integer code as `code` (a host reads status first: an HTTP error that carries a code). */
export class PalaceHttpError extends PalaceError {
  readonly status: number;
  readonly code?: number;
  readonly rpcError?: { code?: unknown; message?: unknown };
  constructor(status: number, rpcError?: { code?: unknown; message?: unknown }, detail = "") {
    let text = `mempalace HTTP ${status}`;
    if (rpcError) text += ` (JSON-RPC ${String(rpcError.code)}: ${String(rpcError.message)})`;
    if (detail) text += `: ${detail}`;
    super(text);
    this.name = "PalaceHttpError";
    this.status = status;
    this.rpcError = rpcError;
    if (typeof rpcError?.code === "number" && Number.isInteger(rpcError.code)) this.code = rpcError.code;
    this.detail = detail;
  }
}

/** One line for a person, whatever failed. */
export function describe(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : String(error);
  return text.split(/\s+/).filter(Boolean).join(" ");
}

export function redactText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (secret) out = out.split(secret).join(REDACTED);
  return out;
}

function redactValue(value: unknown, secrets: readonly string[]): unknown {
  if (typeof value === "string") return redactText(value, secrets);
  if (Array.isArray(value)) return value.map((item) => redactValue(item, secrets));
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [redactText(k, secrets), redactValue(v, secrets)]));
  }
  return value;
}

/** `error` itself with every secret replaced in its message and every own field, however nested. */
export function redactError<E extends Error>(error: E, secrets: readonly string[]): E {
  if (!secrets.some(Boolean)) return error;
  const fields = error as unknown as Record<string, unknown>;
  for (const key of Object.keys(error)) fields[key] = redactValue(fields[key], secrets);
  error.message = redactText(error.message, secrets);
  if (error.stack) error.stack = redactText(error.stack, secrets);
  return error;
}

/**
 * Holds back the end of a chunk while it could be the start of a secret, so redaction of a stream
 * read in chunks always sees each secret whole.
 */
export class SplitSecretGuard {
  private readonly secrets: string[];
  private held = "";

  constructor(secrets: readonly string[]) {
    this.secrets = secrets.filter(Boolean);
  }

  feed(text: string): string {
    const whole = redactText(this.held + text, this.secrets);
    const keep = this.secretPrefixAtEnd(whole);
    this.held = keep ? whole.slice(whole.length - keep) : "";
    return whole.slice(0, whole.length - keep);
  }

  flush(): string {
    const held = this.held;
    this.held = "";
    return held;
  }

  private secretPrefixAtEnd(text: string): number {
    let longest = 0;
    for (const secret of this.secrets) {
      for (let size = Math.min(secret.length - 1, text.length); size > longest; size -= 1) {
        if (secret.startsWith(text.slice(text.length - size))) {
          longest = size;
          break;
        }
      }
    }
    return longest;
  }
}
