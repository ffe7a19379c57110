/**
 * The palace client the extension uses: one façade over the local child or the remote palace. The
 * transport is picked once, from the environment snapshot taken at load (LIFE-03):
 * MEMPALACE_REMOTE_URL set means the remote palace and never a local child (LIFE-02). start() never
 * throws: false means "run without palace tools".
 */
import type { BridgeConfig } from "./config.ts";
import { START_FAILED_LINE, type Engine } from "./engine.ts";
import { describe, PalaceError, PalaceToolError, PalaceUnavailable, redactError } from "./errors.ts";
import type { RpcReply } from "./handshake.ts";
import { LocalEngine } from "./local.ts";
import { Log, type Sink } from "./log.ts";
import { RemoteEngine } from "./remote.ts";
import { type ToolResult, type ToolSpec, toolResultFromWire } from "./tools.ts";

export interface PalaceCaller {
  callTool(name: string, args: Record<string, unknown>, timeoutMs?: number): Promise<ToolResult>;
}

function isReply(value: RpcReply | ToolResult): value is RpcReply {
  return !("content" in value && "isError" in value);
}

export class PalaceClient implements PalaceCaller {
  readonly engine: Engine;
  readonly log: Log;
  private started?: Promise<boolean>;

  constructor(engine: Engine, log: Log) {
    this.engine = engine;
    this.log = log;
  }

  /** Handshake including tools/list; false = unavailable (already logged). */
  start(): Promise<boolean> {
    this.started ??= this.engine.start().catch((error: unknown) => {
      this.log.line(START_FAILED_LINE(describe(error)));
      return false;
    });
    return this.started;
  }

  /** Resolves when the next request is handed to the wire (not when it is answered). */
  nextDispatch(): Promise<void> {
    return this.engine.dispatched.next();
  }

  async tools(): Promise<ToolSpec[]> {
    return (await this.start()) ? [...this.engine.tools] : [];
  }

  /** Run one tool; arguments go out unchanged (TOOL-02). A JSON-RPC error is a PalaceToolError
   * (TOOL-04); every error leaves here redacted (the server may echo the token). */
  async callTool(name: string, args: Record<string, unknown>, timeoutMs?: number): Promise<ToolResult> {
    try {
      if (!(await this.start())) throw new PalaceUnavailable("the palace did not start; no palace tools this session");
      const reply = await this.engine.callTool(name, args, timeoutMs);
      if (!isReply(reply)) return reply;
      if (reply.error) throw new PalaceToolError(reply.error.code, reply.error.message, reply.error.data, "tools/call");
      return toolResultFromWire(reply.result);
    } catch (error) {
      if (error instanceof Error) throw redactError(error, this.log.secrets);
      throw error;
    }
  }

  /** Shut the transport down; safe to call twice, never throws. */
  async stop(): Promise<void> {
    try {
      await this.engine.stop();
    } catch (error) {
      if (!(error instanceof PalaceError)) throw error;
      this.log.debug(`stop: ${describe(error)}`);
    }
  }
}

export function createClient(config: BridgeConfig, env: Record<string, string>, sink?: Sink): PalaceClient {
  const log = new Log(sink, config.debug, config.remoteToken ? [config.remoteToken] : []);
  const engine: Engine = config.remoteUrl ? new RemoteEngine(config, log) : new LocalEngine(config, env, log);
  return new PalaceClient(engine, log);
}
