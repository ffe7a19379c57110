/**
 * What the palace offers and returns, as plain data. Schemas are passed through untouched
 * (TOOL-01, the seed's Type.Unsafe lesson); results keep everything the server sent.
 */
import { isRecord } from "./config.ts";
import { PalaceProtocolError } from "./errors.ts";

export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export interface ToolResult {
  content: Record<string, unknown>[];
  isError: boolean;
  structured?: Record<string, unknown>;
}

export function toolSpecFromWire(data: Record<string, unknown>): ToolSpec {
  return {
    name: String(data.name),
    description: typeof data.description === "string" ? data.description : "",
    inputSchema: isRecord(data.inputSchema) ? data.inputSchema : { type: "object" },
  };
}

/** A tools/call result; isError results are results, not exceptions (TOOL-03). */
export function toolResultFromWire(result: unknown): ToolResult {
  if (!isRecord(result)) throw new PalaceProtocolError(`tools/call result is not an object: ${JSON.stringify(result)?.slice(0, 120)}`);
  const content = result.content ?? [];
  if (!Array.isArray(content) || !content.every(isRecord)) {
    throw new PalaceProtocolError("tools/call result has no valid 'content' list");
  }
  const out: ToolResult = { content: content as Record<string, unknown>[], isError: result.isError === true };
  if (isRecord(result.structuredContent)) out.structured = result.structuredContent;
  return out;
}

/** The first text block's text ("" when there is none). */
export function resultText(result: ToolResult): string {
  for (const block of result.content) {
    if (block.type === "text" && typeof block.text === "string") return block.text;
  }
  return "";
}

/** The JSON inside a result's text (mempalace answers JSON text), or undefined. */
export function parseJsonText(result: ToolResult): unknown {
  try {
    return JSON.parse(resultText(result));
  } catch {
    return undefined;
  }
}

/** A result that did not do its job: isError, `{"success": false}`, or an `{"error": ...}` body
 * without `success: true` (how mempalace 3.11 answers a read it could not serve). */
export function failed(result: ToolResult): boolean {
  if (result.isError) return true;
  const body = parseJsonText(result);
  if (!isRecord(body)) return false;
  return body.success === false || ("error" in body && body.success !== true);
}
