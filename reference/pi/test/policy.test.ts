/** The copy's policy parts as plain functions over events and a clock (no I/O, no sleeping). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ConnectRetries } from "../src/connect.ts";
import { Deadline, TimeoutPolicy } from "../src/deadline.ts";
import { SessionGenerations } from "../src/session.ts";
import { FakeClock } from "./fake-clock.ts";

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
