/**
 * The local palace: a supervised `mempalace-mcp` child (the seed's hardened default path).
 *
 * Glue between RespawnPolicy (what to do) and StdioConnection (doing it). A stalled request fails
 * with a timeout and its child is killed (SIGTERM, SIGKILL after the grace), never retried; the next
 * call respawns after the backoff, redoes the handshake and runs (STDIO-01/02/05). A crash fails the
 * in-flight calls at once (STDIO-12). A configured session preamble runs on every new child, right
 * after tools/list: each spawn is a new connection, and ADR-044 selects the mode "first on every
 * connection".
 */
import { type Clock, SYSTEM_CLOCK } from "./clock.ts";
import type { BridgeConfig } from "./config.ts";
import { type Deadline, TimeoutPolicy } from "./deadline.ts";
import { killAtHostExit, spareAtHostExit } from "../../seed-policy/child-exit.ts";
import { DispatchSignal } from "../../seed-policy/dispatch.ts";
import { START_FAILED_LINE, type Engine } from "./engine.ts";
import { PalaceConnectionClosed, PalaceError, PalaceTimeout, PalaceUnavailable } from "./errors.ts";
import { checkInitialize, initializeParams, listTools, type RpcReply } from "./handshake.ts";
import { Mutex } from "./lock.ts";
import type { Log } from "./log.ts";
import { RespawnPolicy } from "../../seed-policy/respawn.ts";
import { StdioConnection, Unspawnable } from "./stdio.ts";
import type { ToolSpec } from "./tools.ts";

const why = (error: unknown): string =>
  error instanceof PalaceUnavailable ? error.detail : error instanceof Error ? error.message : String(error);

export class LocalEngine implements Engine {
  readonly remote = false;
  tools: ToolSpec[] = [];
  startError?: PalaceError;
  readonly dispatched = new DispatchSignal();
  private readonly config: BridgeConfig;
  private readonly env: Record<string, string>;
  private readonly log: Log;
  private readonly clock: Clock;
  readonly policy: RespawnPolicy;
  private readonly timeouts: TimeoutPolicy;
  private conn?: StdioConnection;
  private readonly dying = new Map<StdioConnection, Promise<void>>();
  private readonly lock = new Mutex();
  private started?: boolean;
  private idCounter = 0;
  readonly spawnedPids: number[] = [];

  constructor(config: BridgeConfig, env: Record<string, string>, log: Log, clock: Clock = SYSTEM_CLOCK) {
    this.config = config;
    this.env = env;
    this.log = log;
    this.clock = clock;
    this.policy = new RespawnPolicy(config.maxRespawns, config.respawnBackoffMs);
    this.timeouts = new TimeoutPolicy(config.timeoutMs, config.initTimeoutMs);
  }

  /** First start, tolerant: the same bounded respawn runs before giving up (STDIO-09). */
  start(): Promise<boolean> {
    return this.lock.run(async () => {
      if (this.started !== undefined) return this.started;
      try {
        await this.ensureChild();
      } catch (error) {
        if (!(error instanceof PalaceError)) throw error;
        this.started = false;
        this.startError = error;
        this.log.line(START_FAILED_LINE(why(error)));
        return false;
      }
      this.started = true;
      return true;
    });
  }

  stop(): Promise<void> {
    return this.lock.run(async () => {
      this.policy.onStop();
      const conn = this.conn;
      this.conn = undefined;
      if (conn) {
        await conn.close(this.config.killGraceMs);
        spareAtHostExit(conn);
      }
      await this.awaitDying();
    });
  }

  async callTool(name: string, args: Record<string, unknown>, timeoutMs?: number): Promise<RpcReply> {
    return this.request("tools/call", { name, arguments: args }, timeoutMs);
  }

  async request(method: string, params: Record<string, unknown> | undefined, timeoutMs?: number): Promise<RpcReply> {
    if (this.started === undefined) await this.start();
    if (this.started === false) {
      throw new PalaceUnavailable(`mempalace-mcp did not start (${this.policy.latchReason || this.policy.lastFailure || "see stderr"})`);
    }
    const conn = await this.lock.run(() => this.ensureChild());
    const deadline = this.timeouts.forRequest(this.clock, timeoutMs);
    try {
      return await conn.request(method, params, deadline);
    } catch (error) {
      if (error instanceof PalaceTimeout) this.retire(conn, `${method} stalled past ${deadline.timeoutMs} ms`);
      else if (error instanceof PalaceConnectionClosed) this.retire(conn, error.detail);
      throw error;
    }
  }

  /** pids of the children still alive (the current one and any being killed). */
  get childPids(): number[] {
    return [this.conn, ...this.dying.keys()].flatMap((c) => (c && c.pid !== undefined && !c.exited ? [c.pid] : []));
  }

  /** A ready child: the current one, or a (re)spawn the policy allows. Runs under `lock`. */
  private async ensureChild(): Promise<StdioConnection> {
    const current = this.conn;
    if (current && !current.alive) this.retire(current, current.closedReason ?? "mempalace-mcp exited");
    for (;;) {
      const decision = this.policy.wantChild();
      if (decision.kind === "use-current") return this.conn as StdioConnection;
      if (decision.kind === "refuse") throw new PalaceUnavailable(decision.why);
      await this.awaitDying(); // the old child must let go of the palace lock first
      if (decision.delayMs) {
        this.log.debug(`respawn attempt ${decision.attempt} in ${decision.delayMs} ms`);
        await this.clock.sleep(decision.delayMs);
      }
      try {
        this.conn = await this.spawnReady();
      } catch (error) {
        if (error instanceof Unspawnable) {
          this.policy.onUnspawnable(error.detail);
          throw error;
        }
        if (!(error instanceof PalaceError)) throw error;
        this.policy.onStartFailed(why(error));
        this.log.debug(`start attempt ${decision.attempt} failed: ${why(error)}`);
        continue;
      }
      this.policy.onReady();
      return this.conn;
    }
  }

  private async spawnReady(): Promise<StdioConnection> {
    const conn = new StdioConnection([this.config.serverCommand], this.env, () => ++this.idCounter, this.log,
      () => this.policy.onSuccess(), () => this.dispatched.fire());
    conn.spawn();
    // a host that exits without stop() must not leave palace servers behind (LIFE-06)
    killAtHostExit(conn, () => conn.killNow());
    if (conn.pid !== undefined) this.spawnedPids.push(conn.pid);
    const deadline = this.timeouts.forHandshake(this.clock);
    try {
      await this.handshake(conn, deadline);
    } catch (error) {
      await this.kill(conn, why(error));
      throw error;
    }
    return conn;
  }

  private async handshake(conn: StdioConnection, deadline: Deadline): Promise<void> {
    checkInitialize(await conn.request("initialize", initializeParams(), deadline));
    conn.notify("notifications/initialized");
    this.tools = await listTools((m, p, d) => conn.request(m, p, d), deadline, this.log);
    const preamble = this.config.preamble;
    if (preamble) {
      const reply = await conn.request("tools/call", { name: preamble.tool, arguments: preamble.arguments },
        this.timeouts.forRequest(this.clock));
      if (reply.error) throw new PalaceUnavailable(`session preamble ${preamble.tool} failed: ${reply.error.message}`);
    }
  }

  /** This child is done for: tell the policy (if it is the current one) and kill it. */
  private retire(conn: StdioConnection, reason: string): void {
    if (conn === this.conn) {
      this.policy.onDeath(reason);
      this.conn = undefined;
    }
    if (this.dying.has(conn)) return;
    void this.kill(conn, reason);
  }

  private kill(conn: StdioConnection, reason: string): Promise<void> {
    const existing = this.dying.get(conn);
    if (existing) return existing;
    const ending = conn.terminate(this.config.killGraceMs, reason).finally(() => {
      this.dying.delete(conn);
      spareAtHostExit(conn);
    });
    this.dying.set(conn, ending);
    return ending;
  }

  private async awaitDying(): Promise<void> {
    while (this.dying.size) await Promise.allSettled([...this.dying.values()]);
  }
}
