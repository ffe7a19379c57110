/** What the client façade needs from a transport engine (local child or remote session). */
import type { DispatchSignal } from "../../seed-policy/dispatch.ts";
import type { PalaceError } from "./errors.ts";
import type { RpcReply } from "./handshake.ts";
import type { ToolResult, ToolSpec } from "./tools.ts";

export interface Engine {
  readonly remote: boolean;
  readonly tools: ToolSpec[];
  readonly startError?: PalaceError;
  /** Fires whenever a request is handed to the wire. */
  readonly dispatched: DispatchSignal;
  start(): Promise<boolean>;
  /** One tools/call; JSON-RPC errors come back in the reply, transport failures are thrown. */
  callTool(name: string, args: Record<string, unknown>, timeoutMs?: number): Promise<RpcReply | ToolResult>;
  stop(): Promise<void>;
}

export const START_FAILED_LINE = (why: string): string => `mempalace-mcp unavailable (${why}); continuing without palace tools`;
