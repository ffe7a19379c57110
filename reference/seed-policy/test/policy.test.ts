/** The shared seed policy's own tests (both copies run them: `npm test` in reference/pi and reference/opencode). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { exponentialDelayMs } from "../backoff.ts";
import { dropPipesAfterDrain, ExitWaiters } from "../child-exit.ts";
import { RespawnPolicy } from "../respawn.ts";
import { TIMER_MAX_MS, timerMs } from "../timer.ts";

describe("backoff", () => {
  it("doubles per attempt from the base and honours a cap", () => {
    assert.deepEqual([1, 2, 3, 4].map((n) => exponentialDelayMs(1000, n)), [1000, 2000, 4000, 8000]);
    assert.equal(exponentialDelayMs(1000, 5, 3000), 3000);
    assert.throws(() => exponentialDelayMs(1000, 0), RangeError);
  });
});

describe("timer delays past 2^31-1 ms", () => {
  it("are clamped to the longest delay a timer holds; smaller ones pass unchanged", () => {
    assert.equal(TIMER_MAX_MS, 2147483647);
    assert.equal(timerMs(2 ** 31), TIMER_MAX_MS);
    assert.equal(timerMs(Number.MAX_SAFE_INTEGER), TIMER_MAX_MS);
    assert.equal(timerMs(TIMER_MAX_MS), TIMER_MAX_MS);
    assert.equal(timerMs(1500), 1500);
    assert.equal(timerMs(0), 0);
    assert.equal(timerMs(-5), 0);
  });
});

describe("a child's exit", () => {
  it("wakes its waiters when it comes; a wait that runs out says whether it came", async () => {
    const waiters = new ExitWaiters();
    assert.equal(await waiters.wait(10, () => true), true); // exited already: at once
    const woken = waiters.wait(5_000, () => false); // the wake, not the predicate, says it came
    waiters.wakeAll();
    assert.equal(await woken, true);
    assert.equal(await waiters.wait(20, () => false), false);
    let reaped = false;
    const late = waiters.wait(20, () => reaped); // came without a wake: seen at the wait's end
    reaped = true;
    assert.equal(await late, true);
  });

  it("drops the pipes once both outputs ended, or after the drain time when they do not", async () => {
    const dropped: string[] = [];
    const pipe = (name: string) => ({ destroy: () => dropped.push(name) });
    const child = { stdin: pipe("stdin"), stdout: pipe("stdout"), stderr: pipe("stderr") };
    let started = Date.now();
    await dropPipesAfterDrain(child, () => true, 60_000);
    assert.ok(Date.now() - started < 10_000);
    assert.deepEqual(dropped, ["stdin", "stdout", "stderr"]);
    started = Date.now();
    await dropPipesAfterDrain(child, () => false, 100);
    assert.ok(Date.now() - started >= 100);
    assert.equal(dropped.length, 6);
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

  it("refuses after stop and will not start twice at once", () => {
    const policy = new RespawnPolicy(2, 1000);
    policy.wantChild();
    assert.throws(() => policy.wantChild(), /serialise starts/);
    policy.onStop();
    assert.deepEqual(policy.wantChild(), { kind: "refuse", why: "the palace client was stopped" });
  });
});
