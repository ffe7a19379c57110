// What a palace tool result says, read the same way in every copy (reference/palace_bridge/tools.py,
// the pi copy's src/tools.ts): its first text block, and whether it did its job.

import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

/** The text of a result's first text block, or "". */
export function resultText(result: CallToolResult): string {
  const first = result.content.find((block) => block.type === "text");
  return first?.type === "text" ? first.text : "";
}

/** A result that did not do its job: `isError`, `{"success": false}`, or `{"error": ...}` without `success: true`. */
export function failed(result: CallToolResult): boolean {
  if (result.isError) return true;
  let body: unknown;
  try {
    body = JSON.parse(resultText(result));
  } catch {
    return false;
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) return false;
  const record = body as Record<string, unknown>;
  return record["success"] === false || ("error" in record && record["success"] !== true);
}
