/**
 * Knob-sized delays past a Node timer's range (2^31-1 ms): `setTimeout` fires those at once (with a
 * TimeoutOverflowWarning), so a huge keep-alive period, backoff, grace or timeout must be clamped
 * to a long bound, never wrapped into "now".
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { overflows, pingsSoonAfterStart } from "../../seed-policy/test/support.ts";
import { readConfig } from "../src/config.ts";
import { execWith } from "../src/exec.ts";
import { RemotePalace } from "../src/remote.ts";

describe("timer delays past 2^31-1 ms", () => {
  after(() => assert.deepEqual(overflows, [], "no delay reached a timer unclamped"));

  it("a prepare timeout of 2^32 ms lets the helper finish (FEED-05's knob), not killed at once", async () => {
    const run = await execWith(process.env)(process.execPath, ["-e", "setTimeout(() => process.stdout.write('done'), 200)"], 2 ** 32);
    assert.deepEqual({ killed: run.killed, code: run.code, stdout: run.stdout }, { killed: false, code: 0, stdout: "done" });
  });

  it("a keep-alive period of 2^31 ms sends no ping soon after the start (HTTP-06's knob)", async () => {
    const pings = await pingsSoonAfterStart((url) => new RemotePalace(readConfig({ MEMPALACE_REMOTE_URL: url, MEMPALACE_MCP_KEEPALIVE_MS: String(2 ** 31) }), { line: () => undefined, debug: () => undefined }));
    assert.equal(pings, 0, "an overflowed keep-alive timer pings at once, and again every millisecond");
  });
});
