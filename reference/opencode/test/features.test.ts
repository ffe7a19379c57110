/** The OpenCode copy's feeding, diary prompt and helper runner (FEED-*, DIARY-01), over in-memory fakes and real processes. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

import { readConfig } from "../src/config.ts";
import { diaryPrompt, diaryTopic } from "../../seed-policy/diary.ts";
import { PalaceTimeout, PalaceToolError } from "../src/errors.ts";
import { execWith, type ExecResult } from "../src/exec.ts";
import { Feeder, type FeedCaller, mineSource } from "../src/feeding.ts";
import { stamperFor } from "../../seed-policy/provenance.ts";

const settings = { enabled: true, bin: "prep", wing: "wing_w", debounceMs: 1000, prepareTimeoutMs: 500,
  mineTimeoutMs: 300, remote: false };
const ok = (text: string): CallToolResult => ({ content: [{ type: "text", text }] });
const prepared = async (): Promise<ExecResult> => ({ stdout: "MINE_SOURCE=/x", stderr: "", code: 0, killed: false });

function recording(answer: () => Promise<CallToolResult> = async () => ok("{\"success\": true}")) {
  const calls: { name: string; args: Record<string, unknown>; timeoutMs: number | undefined }[] = [];
  const caller: FeedCaller = async (name, args, timeoutMs) => {
    calls.push({ name, args, timeoutMs });
    return answer();
  };
  return { calls, caller };
}

describe("feeding (FEED-*)", () => {
  it("reads the last MINE_SOURCE line, paths with '=' kept", () => {
    assert.equal(mineSource("log\nMINE_SOURCE=/a\nMINE_SOURCE=/b=c\n"), "/b=c");
    assert.equal(mineSource("MINE_SOURCE=\nnothing"), undefined);
  });

  it("prepares then mines with the wing under the mine timeout; the window holds session.idle back", async () => {
    let now = 0;
    const { calls, caller } = recording();
    const runs: string[][] = [];
    const exec = async (command: string, args: string[], timeoutMs: number | undefined): Promise<ExecResult> => {
      runs.push([command, ...args, String(timeoutMs)]);
      return { stdout: "MINE_SOURCE=/tmp/x\n", stderr: "", code: 0, killed: false };
    };
    const feeder = new Feeder(settings, exec, caller, stamperFor(undefined, false), () => now, () => undefined);
    assert.equal(await feeder.settled(), "mined");
    assert.deepEqual(runs[0], ["prep", "--prepare", "--reason", "agent_settled", "--wing", "wing_w", "500"]);
    assert.deepEqual(calls[0], { name: "mempalace_mine", args: { source: "/tmp/x", wing: "wing_w" }, timeoutMs: 300 });
    now = 999;
    assert.equal(feeder.settled(), undefined);
    now = 1000;
    assert.equal(await feeder.settled(), "mined");
    assert.equal(await feeder.shutdown(), "mined");
    assert.equal(runs[2]?.[3], "session_shutdown");
    assert.equal(feeder.settled(), undefined); // closed after the shutdown feed
  });

  it("a 0 ms mine timeout is no timeout (the request timeout is not used either)", async () => {
    const { calls, caller } = recording();
    const feeder = new Feeder({ ...settings, mineTimeoutMs: 0, prepareTimeoutMs: 0 }, async (_c, _a, timeoutMs) => {
      assert.equal(timeoutMs, undefined);
      return prepared();
    }, caller, stamperFor(undefined, false), () => 0, () => undefined);
    assert.equal(await feeder.shutdown(), "mined");
    assert.equal(calls[0]?.timeoutMs, undefined);
  });

  it("a refused mine is reported and leaves the window open (FEED-10); a failed result is mine_failed", async () => {
    const lines: string[] = [];
    const refused = recording(async () => { throw new PalaceToolError(-32001, "palace is held by PID 1", undefined); });
    const feeder = new Feeder(settings, prepared, refused.caller, stamperFor(undefined, false), () => 0, (l) => lines.push(l));
    assert.equal(await feeder.settled(), "mine_refused");
    assert.match(lines[0] ?? "", /another writer holds the palace \(-32001\)/);
    assert.equal(await feeder.settled(), "mine_refused"); // not debounced: nothing was filed
    const bad = recording(async () => ok("{\"success\": false, \"error\": \"no such dir\"}"));
    const failing = new Feeder(settings, prepared, bad.caller, stamperFor(undefined, false), () => 0, (l) => lines.push(l));
    assert.equal(await failing.settled(), "mine_failed");
    assert.match(lines.at(-1) ?? "", /did not file the export: .*no such dir/);
  });

});

describe("feeding (FEED-*): failures and knobs", () => {
  it("a killed or failed prepare mines nothing; a remote palace without an ssh target says so once", async () => {
    const { calls, caller } = recording();
    const lines: string[] = [];
    const stamper = stamperFor(undefined, false);
    const killed = new Feeder(settings, async () => ({ stdout: "MINE_SOURCE=/x", stderr: "", code: 143, killed: true }),
      caller, stamper, () => 0, (l) => lines.push(l));
    assert.equal(await killed.settled(), "prepare_timeout");
    const died = new Feeder(settings, async () => ({ stdout: "MINE_SOURCE=/x", stderr: "bad\n  thing", code: 143, killed: false }),
      caller, stamper, () => 0, (l) => lines.push(l));
    assert.equal(await died.settled(), "prepare_failed");
    assert.match(lines.at(-1) ?? "", /exited 143; nothing mined: bad thing$/);
    const empty = new Feeder(settings, async () => ({ stdout: "nothing new\n", stderr: "", code: 0, killed: false }),
      caller, stamper, () => 0, () => undefined);
    assert.equal(await empty.settled(), "nothing");
    assert.equal(calls.length, 0);
    const remoteLines: string[] = [];
    const remote = new Feeder({ ...settings, remote: true }, async () => { throw new Error("must not run"); },
      caller, stamper, () => 0, (l) => remoteLines.push(l));
    assert.equal(remote.settled(), undefined);
    assert.equal(await remote.shutdown(), undefined);
    assert.deepEqual(remoteLines.length, 1);
    assert.match(remoteLines[0] ?? "", /MEMPALACE_PI_SSH_TARGET/);
  });

  it("a mine timeout fails that feed, reported; the writer is stamped on a shared palace", async () => {
    const { calls, caller } = recording(async () => { throw new PalaceTimeout("mempalace mempalace_mine timed out after 300 ms"); });
    const lines: string[] = [];
    const feeder = new Feeder({ ...settings, remote: true, sshTarget: "me@host" }, prepared, caller,
      stamperFor("box", true), () => 0, (l) => lines.push(l));
    assert.equal(await feeder.shutdown(), "mine_failed");
    assert.match(lines[0] ?? "", /mempalace_mine failed: .*timed out after 300 ms; the next trigger will try again/);
    assert.equal(calls[0]?.args["agent"], "pi@box");
  });

  it("reads the feeding knobs with the seed's defaults", () => {
    const config = readConfig({});
    assert.deepEqual([config.feed, config.feedBin, config.feedWing, config.feedDebounceMs, config.feedPrepareTimeoutMs,
      config.feedMineTimeoutMs, config.sshTarget], [true, "mempalace-pi-session", "wing_conversations", 600000, 120000, 30000, undefined]);
    const off = readConfig({ MEMPALACE_FEED: "off", MEMPALACE_FEED_DEBOUNCE_MS: "0", MEMPALACE_FEED_MINE_TIMEOUT_MS: "x" });
    assert.equal(off.feed, false);
    assert.equal(off.feedDebounceMs, 0);
    assert.equal(off.feedMineTimeoutMs, 30000);
    assert.match(off.warnings[0] ?? "", /MEMPALACE_FEED_MINE_TIMEOUT_MS='x'/);
  });
});

describe("the helper runner (FEED-01)", () => {
  const exec = execWith({ ...process.env });

  it("captures output and the exit code; a missing program is code 1 with its error", async () => {
    const done = await exec(process.execPath, ["-e", "process.stdout.write('MINE_SOURCE=/y\\n'); process.stderr.write('e'); process.exit(3)"], undefined);
    assert.deepEqual(done, { stdout: "MINE_SOURCE=/y\n", stderr: "e", code: 3, killed: false });
    const missing = await exec("/nonexistent/mempalace-pi-session", [], 1000);
    assert.equal(missing.code, 1);
    assert.equal(missing.killed, false);
    assert.match(missing.stderr, /ENOENT/);
  });

  it("kills on its own timeout (killed), and a death by a signal is 128 + its number", async () => {
    const slow = await exec(process.execPath, ["-e", "setTimeout(() => {}, 30000)"], 200);
    assert.equal(slow.killed, true);
    assert.equal(slow.code, 143);
    const selfKilled = await exec(process.execPath, ["-e", "process.kill(process.pid, 'SIGTERM')"], undefined);
    assert.deepEqual([selfKilled.code, selfKilled.killed], [143, false]);
  });
});

describe("diary (DIARY-01)", () => {
  it("asks for one diary_write as the agent, with the topic collapsed when given", () => {
    assert.match(diaryPrompt("pi", undefined), /mempalace_diary_write tool once, with agent_name="pi"/);
    assert.doesNotMatch(diaryPrompt("pi", undefined), /topic=/);
    assert.match(diaryPrompt("pi-laptop", diaryTopic("  the   release ")), /topic="the release"/);
    assert.equal(diaryTopic("   "), undefined);
  });
});
