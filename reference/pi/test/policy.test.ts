/** The copy's policy parts as plain functions over events and a clock (no I/O, no sleeping). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { exponentialDelayMs } from "../src/backoff.ts";
import { ConnectRetries } from "../src/connect.ts";
import { Deadline, TimeoutPolicy } from "../src/deadline.ts";
import { RespawnPolicy } from "../src/respawn.ts";
import { SessionGenerations } from "../src/session.ts";
import { FakeClock } from "./fake-clock.ts";

describe("backoff", () => {
  it("doubles per attempt from the base and honours a cap", () => {
    assert.deepEqual([1, 2, 3, 4].map((n) => exponentialDelayMs(1000, n)), [1000, 2000, 4000, 8000]);
    assert.equal(exponentialDelayMs(1000, 5, 3000), 3000);
    assert.throws(() => exponentialDelayMs(1000, 0), RangeError);
  });
});

describe("deadline", () => {
  it("counts down on the clock and never goes negative", () => {
    const clock = new FakeClock();
    const deadline = new Deadline(clock, 300);
    assert.equal(deadline.remainingMs(), 300);
    clock.advance(299);
    assert.equal(deadline.expired(), false);
    clock.advance(1);
    assert.equal(deadline.expired(), true);
    clock.advance(50);
    assert.equal(deadline.remainingMs(), 0);
  });

  it("0 disables it (STDIO-04)", () => {
    const clock = new FakeClock();
    const deadline = new Deadline(clock, 0);
    clock.advance(10 ** 9);
    assert.equal(deadline.remainingMs(), undefined);
    assert.equal(deadline.expired(), false);
  });

  it("gives the handshake its own budget and lets a call override the request one (STDIO-03)", () => {
    const clock = new FakeClock();
    const policy = new TimeoutPolicy(60000, 300000);
    assert.equal(policy.forHandshake(clock).timeoutMs, 300000);
    assert.equal(policy.forRequest(clock).timeoutMs, 60000);
    assert.equal(policy.forRequest(clock, 500).timeoutMs, 500);
    assert.throws(() => new Deadline(clock, -1), RangeError);
  });
});

describe("respawn policy", () => {
  it("first start, then respawns with doubling backoff until the budget is spent (STDIO-05/06)", () => {
    const policy = new RespawnPolicy(2, 1000);
    assert.deepEqual(policy.wantChild(), { kind: "spawn", attempt: 0, delayMs: 0 });
    policy.onReady();
    assert.deepEqual(policy.wantChild(), { kind: "use-current" });
    policy.onDeath("crash");
    assert.deepEqual(policy.wantChild(), { kind: "spawn", attempt: 1, delayMs: 1000 });
    policy.onStartFailed("exit at startup");
    assert.deepEqual(policy.wantChild(), { kind: "spawn", attempt: 2, delayMs: 2000 });
    policy.onStartFailed("exit at startup");
    const refused = policy.wantChild();
    assert.equal(refused.kind, "refuse");
    assert.match(refused.kind === "refuse" ? refused.why : "", /respawn budget spent \(2 attempt\(s\)\).*exit at startup/);
    assert.equal(policy.state, "latched");
    assert.equal(policy.wantChild().kind, "refuse"); // latched: fails fast, never spawns again
  });

  it("any successful response on a ready child gives the whole budget back (STDIO-07)", () => {
    const policy = new RespawnPolicy(1, 10);
    policy.wantChild();
    policy.onReady();
    policy.onDeath("stall");
    assert.equal(policy.wantChild().kind, "spawn");
    policy.onReady();
    assert.equal(policy.used, 0);
    policy.onDeath("stall");
    assert.deepEqual(policy.wantChild(), { kind: "spawn", attempt: 1, delayMs: 10 });
  });

  it("a response during a start does not reset the budget: only a finished handshake does", () => {
    const policy = new RespawnPolicy(2, 10);
    policy.wantChild();
    policy.onReady();
    policy.onDeath("crash");
    policy.wantChild();
    policy.onSuccess(); // initialize answered, then the child died in the handshake
    policy.onStartFailed("died in tools/list");
    assert.equal(policy.used, 1);
  });

  it("MAX_RESPAWNS=0 is the fail-fast latch (STDIO-08)", () => {
    const policy = new RespawnPolicy(0, 1000);
    policy.wantChild();
    policy.onReady();
    policy.onDeath("crash");
    const decision = policy.wantChild();
    assert.equal(decision.kind, "refuse");
    assert.match(decision.kind === "refuse" ? decision.why : "", /self-heal is off \(MEMPALACE_MCP_MAX_RESPAWNS=0\)/);
  });

  it("an unspawnable binary latches at once; a stopped client refuses", () => {
    const policy = new RespawnPolicy(2, 1000);
    policy.wantChild();
    policy.onUnspawnable("mempalace-mcp not found on PATH");
    assert.deepEqual(policy.wantChild(), { kind: "refuse", why: "mempalace-mcp not found on PATH" });
    const stopped = new RespawnPolicy(2, 1000);
    stopped.onStop();
    assert.equal(stopped.wantChild().kind, "refuse");
  });
});

describe("connect retries (HTTP-02)", () => {
  it("retries the configured number of times with doubling waits, then gives up", () => {
    const retries = new ConnectRetries(2, 250);
    assert.equal(retries.onFailure("refused"), 250);
    assert.equal(retries.onFailure("refused"), 500);
    assert.equal(retries.onFailure("401"), undefined);
    assert.equal(retries.lastFailure, "401");
    assert.equal(new ConnectRetries(0, 250).onFailure("x"), undefined);
  });
});

describe("session renewal (HTTP-04)", () => {
  it("renews and retries once on a 404, fails the retry's 404 (no loop)", () => {
    const sessions = new SessionGenerations();
    const first = sessions.onInitialized();
    assert.equal(sessions.onNotFound(first, 0), "renew-and-retry");
    assert.equal(sessions.needsInit, true);
    const second = sessions.onInitialized();
    assert.equal(sessions.onNotFound(second, 1), "session-lost");
    assert.equal(sessions.needsInit, true);
  });

  it("a call that noticed an already replaced session retries on the current one, no new init", () => {
    const sessions = new SessionGenerations();
    const old = sessions.onInitialized();
    assert.equal(sessions.onNotFound(old, 0), "renew-and-retry");
    sessions.onInitialized();
    assert.equal(sessions.onNotFound(old, 0), "retry-on-current");
    assert.equal(sessions.needsInit, false);
  });

  it("a ping's 404 replaces only the current session (HTTP-06)", () => {
    const sessions = new SessionGenerations();
    const old = sessions.onInitialized();
    sessions.onInitialized();
    assert.equal(sessions.onPingNotFound(old), false);
    assert.equal(sessions.onPingNotFound(sessions.generation), true);
    assert.equal(sessions.needsInit, true);
  });
});
