/**
 * Knob-sized delays past a Node timer's range (2^31-1 ms): `setTimeout` fires those at once (with a
 * TimeoutOverflowWarning), so a huge keep-alive period, backoff, grace or timeout must be clamped
 * to a long bound, never wrapped into "now".
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import { TIMER_MAX_MS, timerMs } from "../src/timer.ts";
import { readConfig } from "../src/config.ts";
import { execWith } from "../src/exec.ts";
import { RemotePalace } from "../src/remote.ts";

const overflows: string[] = [];
process.on("warning", (warning) => { if (warning.name === "TimeoutOverflowWarning") overflows.push(warning.message); });

const quietFor = (ms: number) => new Promise<"quiet">((resolve) => setTimeout(() => resolve("quiet"), ms));

/** A minimal MCP server over HTTP (JSON answers, no session) counting the pings it gets. */
async function pingCountingPalace(): Promise<{ url: string; pings: () => number; close: () => Promise<void> }> {
  let pings = 0;
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let body = "";
    request.on("data", (chunk: Buffer) => { body += chunk.toString(); });
    request.on("end", () => {
      if (request.method !== "POST") { response.writeHead(405).end(); return; }
      const message = JSON.parse(body) as { id?: number | string; method: string; params?: { protocolVersion?: string } };
      if (message.id === undefined) { response.writeHead(202).end(); return; }
      if (message.method === "ping") pings += 1;
      const result = message.method === "initialize"
        ? { protocolVersion: message.params?.protocolVersion ?? "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "t", version: "0" } }
        : message.method === "tools/list" ? { tools: [] } : {};
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, pings: () => pings,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}

describe("timer delays past 2^31-1 ms", () => {
  after(() => assert.deepEqual(overflows, [], "no delay reached a timer unclamped"));

  it("are clamped to the longest delay a timer holds; smaller ones pass unchanged", () => {
    assert.equal(TIMER_MAX_MS, 2147483647);
    assert.equal(timerMs(2 ** 31), TIMER_MAX_MS);
    assert.equal(timerMs(Number.MAX_SAFE_INTEGER), TIMER_MAX_MS);
    assert.equal(timerMs(TIMER_MAX_MS), TIMER_MAX_MS);
    assert.equal(timerMs(1500), 1500);
    assert.equal(timerMs(0), 0);
    assert.equal(timerMs(-5), 0);
  });

  it("a prepare timeout of 2^32 ms lets the helper finish (FEED-05's knob), not killed at once", async () => {
    const run = await execWith(process.env)(process.execPath, ["-e", "setTimeout(() => process.stdout.write('done'), 200)"], 2 ** 32);
    assert.deepEqual({ killed: run.killed, code: run.code, stdout: run.stdout }, { killed: false, code: 0, stdout: "done" });
  });

  it("a keep-alive period of 2^31 ms sends no ping soon after the start (HTTP-06's knob)", async () => {
    const palace = await pingCountingPalace();
    const config = readConfig({ MEMPALACE_REMOTE_URL: palace.url, MEMPALACE_MCP_KEEPALIVE_MS: String(2 ** 31) });
    const engine = new RemotePalace(config, { line: () => undefined, debug: () => undefined });
    try {
      assert.equal(await engine.start(), true);
      await quietFor(300);
      assert.equal(palace.pings(), 0, "an overflowed keep-alive timer pings at once, and again every millisecond (setInterval)");
    } finally {
      await engine.stop();
      await palace.close();
    }
  });
});
