// Maps whatever a TypeScript bridge threw onto DRIVER.md's error kinds.
//
// A pi extension may use any MCP client, so the error's class is not known in advance. The
// mapping looks at the error's name first (pi-mcp's typed errors), then at its shape (a numeric
// JSON-RPC `code`, an HTTP `status`), and only then at its message. docs/typescript-hosts.md
// lists the rules; keep the two in step. The runner reads the text of an isError result by the
// same BY_MESSAGE table (runner/verdict/surfaced.py; tests/runner/test_surfaced.py checks).

/** An op that failed for a reason the host knows the kind of. */
export class OpError extends Error {
  constructor(kind, message, extra = {}) {
    super(message);
    this.payload = { kind, message, ...extra };
  }
}

/** The error text, with a fetch failure's cause (ECONNREFUSED …) appended. */
export function describe(error) {
  if (error instanceof Error || (error && typeof error.message === "string")) {
    let text = error.message || error.name || "error";
    const cause = error.cause;
    if (cause && typeof cause === "object" && (cause.code || cause.message)) {
      text += ` (${cause.code ?? cause.message})`;
    }
    return text;
  }
  return String(error);
}

const BY_MESSAGE = [
  [/requires? sign-in|requires? authentication|unauthori[sz]ed|forbidden|\b40[13]\b/i, "auth"],
  [/failed to connect|unavailable|not available|is shut down|continuing without/i, "unavailable"],
  [/timed? ?out|timeout|deadline exceeded/i, "timeout"],
  [/session (has )?(expired|lost|not found|unknown)|re-?establish/i, "session_lost"],
  [/connection closed|closed unexpectedly|ECONNRESET|ECONNREFUSED|EPIPE|socket hang up|fetch failed|(child|server) (process )?exited|process exited|terminated/i,
    "connection_closed"],
  [/\bHTTP\s*(\d{3})\b|status(?: code)?\s*(\d{3})/i, "http_error"],
  [/protocol|invalid json|not valid json|unexpected token|content[- ]type|malformed/i, "protocol"],
];

function statusKind(status) {
  if (status >= 200 && status < 300) return "protocol"; // 202 to a request, wrong content type
  if (status === 401 || status === 403) return "auth";
  return "http_error";
}

/** The DRIVER.md error object `{kind, message, code?, data?}` for a thrown value. */
export function classify(error) {
  if (error instanceof OpError) return error.payload;
  const name = String(error?.name ?? error?.constructor?.name ?? "");
  const message = describe(error);
  const status = typeof error?.status === "number" ? error.status : undefined;
  switch (name) {
    case "McpTimeoutError":
      return { kind: "timeout", message };
    case "McpConnectionClosedError":
      // "MCP client is closed": the client latched closed and will never reconnect by itself.
      return { kind: /client is (closed|idle|connecting)/i.test(message) ? "unavailable" : "connection_closed", message };
    case "McpAuthRequiredError":
      return { kind: "auth", message, data: { status: status ?? 401 } };
    case "McpSessionExpiredError":
      return { kind: "session_lost", message, data: { status: status ?? 404 } };
    case "McpHttpError":
      return { kind: statusKind(status ?? 0), message, data: { status } };
    case "McpError": {
      if (/^Invalid MCP /.test(message)) return { kind: "protocol", message, code: error.code };
      // the official SDK's own errors, raised in the client, not answered by the server:
      // its request timeout (-32001, data {timeout}) and its closed transport (-32000)
      if (error.code === -32001 && /: Request timed out$/.test(message)) return { kind: "timeout", message };
      if (error.code === -32000 && /: Connection closed$/.test(message)) return { kind: "connection_closed", message };
      const payload = { kind: "tool_error", message, code: error.code };
      if (error.data !== undefined) payload.data = error.data;
      return payload;
    }
    default:
      break;
  }
  if (status !== undefined && status >= 300 && Number.isInteger(error?.code)) {
    // an HTTP failure whose body was a JSON-RPC error: the status decides the kind, the code is kept
    return { kind: statusKind(status), message, code: error.code, data: { status } };
  }
  if (Number.isInteger(error?.code) && typeof error?.message === "string") {
    const payload = { kind: "tool_error", message, code: error.code };
    if (error.data !== undefined) payload.data = error.data;
    return payload;
  }
  if (status !== undefined && status >= 200) {
    return { kind: statusKind(status), message, data: { status } };
  }
  for (const [pattern, kind] of BY_MESSAGE) {
    const match = pattern.exec(message);
    if (!match) continue;
    if (kind === "http_error") {
      return { kind, message, data: { status: Number(match[1] ?? match[2]) } };
    }
    return { kind, message };
  }
  return { kind: "exception", message: name && name !== "Error" ? `${name}: ${message}` : message };
}
