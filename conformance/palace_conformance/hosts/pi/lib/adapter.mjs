// pi-mcp-adapter as a bridge under test: its configuration, and its failures as error kinds.
//
// The adapter reads `mcpServers` from config files; the host writes one file per run from the
// bridge's environment (MEMPALACE_REMOTE_URL / MEMPALACE_REMOTE_TOKEN, else `mempalace-mcp` on
// PATH) and passes it with the adapter's own `--mcp-config` flag in "exclusive" mode, so a
// user's ~/.config/mcp/mcp.json never leaks in. `directTools: true` makes the adapter register
// every palace tool under its own name (server "mempalace" + the "server" prefix leaves
// `mempalace_search` unchanged), which is what fixtures call.
//
// The adapter never throws from a tool: failures come back as a result whose `details.error`
// holds a code. The host turns those codes into DRIVER.md error kinds (table in
// docs/typescript-hosts.md); `tool_error` (the palace's own isError result) stays a result.

import { classify } from "./errors.mjs";

export const SERVER_NAME = "mempalace";

/** The adapter's mcp.json for this environment. */
export function adapterConfig(env) {
  const settings = { directTools: true, autoAuth: false };
  const timeout = Number(env.MEMPALACE_MCP_TIMEOUT_MS);
  if (Number.isFinite(timeout) && timeout > 0) settings.requestTimeoutMs = timeout;
  let server;
  if (env.MEMPALACE_REMOTE_URL) {
    server = { url: env.MEMPALACE_REMOTE_URL };
    if (env.MEMPALACE_REMOTE_TOKEN) {
      server.auth = "bearer";
      server.bearerTokenEnv = "MEMPALACE_REMOTE_TOKEN";
    }
  } else {
    server = { command: "mempalace-mcp", args: [] };
  }
  return { settings, mcpServers: { [SERVER_NAME]: server } };
}

const UNAVAILABLE = new Set(["server_backoff", "server_unavailable", "not_connected", "server_not_connected",
  "init_failed", "init_timeout", "not_initialized", "server_disabled", "server_not_found"]);

/** `{kind, message, extra}` when an adapter result is really a failure, else undefined. */
export function adapterResultError({ content, details }) {
  const code = details && typeof details === "object" ? details.error : undefined;
  if (typeof code !== "string" || code === "tool_error") return undefined;
  const text = (content ?? []).filter((part) => part?.type === "text").map((part) => part.text).join("\n");
  const message = text || details.message || code;
  const extra = { data: { adapter_error: code } };
  if (code === "auth_required" || code === "not_authenticated") return { kind: "auth", message, extra };
  if (UNAVAILABLE.has(code)) return { kind: "unavailable", message, extra };
  if (code === "tool_not_found" || code === "tool_not_found_after_reconnect") {
    return { kind: "no_such_tool", message, extra };
  }
  if (code === "call_failed") {
    // the adapter keeps only the failure's message (a JSON-RPC error's code is lost), so the
    // kind comes from the text: "Request timed out" -> timeout, "Connection closed" -> ...
    const mapped = classify(new Error(message.replace(/^Failed to call tool:\s*/, "")));
    return { kind: mapped.kind, message, extra: mapped.data ? { ...extra, data: { ...mapped.data, ...extra.data } } : extra };
  }
  return { kind: "exception", message, extra };
}
