/** The OpenCode copy's policy parts as plain functions and small state machines (no processes, no sockets). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { CallToolResult, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

import { parsePreamble, pyRepr, readConfig } from "../src/config.ts";
import { redact } from "../src/errors.ts";
import { failed, formatItems, Mailbox, owed } from "../src/mailbox.ts";
import { stamperFor } from "../../seed-policy/provenance.ts";
import { AnswerWatch, LineEndings, requestIds } from "../src/sse-guard.ts";
import { idKey, StrictIds } from "../src/strict-ids.ts";
import { methodNotFound } from "../src/server-requests.ts";
import type { MailDetails } from "../src/mailbox.ts";

describe("knobs (KNOB-01..02)", () => {
  it("takes the seed's defaults", () => {
    const config = readConfig({});
    assert.equal(config.serverCommand, "mempalace-mcp");
    assert.equal(config.timeoutMs, 60000);
    assert.equal(config.initTimeoutMs, 300000);
    assert.equal(config.maxRespawns, 2);
    assert.equal(config.killGraceMs, 2000);
    assert.equal(config.mailbox, true);
    assert.equal(config.mailboxPollMs, 300000);
    assert.equal(config.agentName, "pi");
    assert.deepEqual(config.warnings, []);
  });

  it("reads integers as Python's int() does and warns once per malformed value, quoted as repr", () => {
    const config = readConfig({ MEMPALACE_MCP_TIMEOUT_MS: " +250 ", MEMPALACE_MCP_MAX_RESPAWNS: "-1",
      MEMPALACE_MAILBOX_POLL_MS: "1.5", MEMPALACE_MCP_KILL_GRACE_MS: "it's" });
    assert.equal(config.timeoutMs, 250);
    assert.equal(config.maxRespawns, 2);
    assert.equal(config.mailboxPollMs, 300000);
    assert.deepEqual(config.warnings, [
      "mempalace: ignoring MEMPALACE_MCP_MAX_RESPAWNS='-1' (expected a non-negative integer); using the default 2",
      "mempalace: ignoring MEMPALACE_MCP_KILL_GRACE_MS=\"it's\" (expected a non-negative integer); using the default 2000",
      "mempalace: ignoring MEMPALACE_MAILBOX_POLL_MS='1.5' (expected a non-negative integer); using the default 300000",
    ]);
    assert.equal(pyRepr("a\\b\n"), "'a\\\\b\\n'");
  });

  it("parses the session preamble or warns and runs none", () => {
    assert.deepEqual(parsePreamble('{"tool": "mempalace_status"}'), { tool: "mempalace_status", arguments: {} });
    assert.equal(parsePreamble('{"tool": ""}'), undefined);
    assert.equal(parsePreamble('{"tool": "x", "arguments": [1]}'), undefined);
    assert.equal(parsePreamble("mempalace_status"), undefined);
    const config = readConfig({ MEMPALACE_SESSION_PREAMBLE: "{" });
    assert.equal(config.preamble, undefined);
    assert.match(config.warnings[0] ?? "", /ignoring MEMPALACE_SESSION_PREAMBLE/);
  });

  it("turns the mailbox off with a false word", () => {
    for (const word of ["0", "false", "no", "off", " OFF "]) {
      assert.equal(readConfig({ MEMPALACE_MAILBOX: word }).mailbox, word.trim() === "OFF", word);
    }
  });
});

describe("provenance (PROV-*)", () => {
  it("stamps only on a shared palace with a device, and keeps an explicit writer", () => {
    assert.deepEqual(stamperFor("box", false).stamp("mempalace_add_drawer", { content: "x" }), { content: "x" });
    assert.deepEqual(stamperFor(undefined, true).stamp("mempalace_add_drawer", { content: "x" }), { content: "x" });
    const stamper = stamperFor("box", true);
    assert.deepEqual(stamper.stamp("mempalace_add_drawer", { content: "x" }), { content: "x", added_by: "pi@box" });
    assert.deepEqual(stamper.stamp("mempalace_add_drawer", { added_by: "ann" }), { added_by: "ann" });
    assert.deepEqual(stamper.stamp("mempalace_add_drawer", { added_by: " " }), { added_by: "pi@box" });
    assert.deepEqual(stamper.stamp("mempalace_search", { query: "q" }), { query: "q" });
  });

  it("prefixes the diary entry once, on the field the server will use", () => {
    const stamper = stamperFor("box", true);
    assert.deepEqual(stamper.stamp("mempalace_diary_write", { entry: "hi" }), { entry: "HOST:box|hi" });
    assert.deepEqual(stamper.stamp("mempalace_diary_write", { content: "hi" }), { content: "HOST:box|hi" });
    assert.deepEqual(stamper.stamp("mempalace_diary_write", { entry: "HOST:other|hi" }), { entry: "HOST:other|hi" });
  });
});

describe("answer streams (HTTP-10, HTTP-12, TOOL-06)", () => {
  it("turns every SSE line ending into LF, also a CRLF split across reads", () => {
    const endings = new LineEndings();
    assert.equal(endings.feed("data: a\r"), "data: a\n");
    assert.equal(endings.feed("\ndata: b\r\r"), "data: b\n\n");
    assert.equal(endings.feed("x\r\ny"), "x\ny");
  });

  it("knows the requests of a POST body by id and JSON type; notifications have none", () => {
    const ids = requestIds(JSON.stringify([{ jsonrpc: "2.0", id: 2, method: "tools/call" },
      { jsonrpc: "2.0", method: "notifications/initialized" }, { jsonrpc: "2.0", id: "a", method: "ping" }]));
    assert.deepEqual([...ids.keys()], ["number:2", "string:a"]);
    assert.equal(requestIds("not json").size, 0);
  });

  it("counts a request answered only by its own id in its own type, and notes an event id", () => {
    const watch = new AnswerWatch(requestIds(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call" })));
    watch.feed(`event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: "2", error: { code: -32099, message: "decoy" } })}\n\n`);
    watch.feed(`event: error\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: 2, result: {} })}\n\n`);
    assert.deepEqual(watch.unanswered, [2]);
    assert.equal(watch.sawEventId, false);
    watch.feed(`id: e1\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: 2, result: {} })}\n`);
    assert.deepEqual(watch.unanswered, [2]); // the event is not over yet
    watch.feed("\n");
    assert.deepEqual(watch.unanswered, []);
    assert.equal(watch.sawEventId, true);
  });

  it("lets only answers to ids it sent reach the client, each once", async () => {
    const seen: JSONRPCMessage[] = [];
    const inner: Transport = { start: async () => undefined, send: async () => undefined, close: async () => undefined };
    const strict = new StrictIds(inner);
    strict.onmessage = (message) => seen.push(message);
    strict.onerror = () => undefined;
    await strict.start();
    await strict.send({ jsonrpc: "2.0", id: 7, method: "tools/call", params: {} });
    const answer = { jsonrpc: "2.0" as const, id: 7, result: {} };
    inner.onmessage?.({ jsonrpc: "2.0", id: "7", result: {} });
    inner.onmessage?.({ jsonrpc: "2.0", id: 8, result: {} });
    inner.onmessage?.(answer);
    inner.onmessage?.(answer);
    inner.onmessage?.({ jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "x" } });
    assert.deepEqual(seen, [answer, { jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "x" } }]);
    assert.equal(idKey(null), undefined);
  });

  it("holds a notification on its way out until it is sent, and stops waiting at its bound", async () => {
    let release: () => void = () => undefined;
    const inner: Transport = { start: async () => undefined, close: async () => undefined,
      send: (message) => ("id" in message ? Promise.resolve() : new Promise<void>((resolve) => { release = resolve; })) };
    const strict = new StrictIds(inner);
    await strict.start();
    let sent = false;
    void strict.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 2 } }).then(() => { sent = true; });
    const started = Date.now();
    await strict.noticesSent(50); // not sent: waited out
    assert.equal(sent, false);
    assert.ok(Date.now() - started >= 40);
    setTimeout(() => release(), 10);
    await strict.noticesSent(5000);
    assert.equal(sent, true);
    await strict.noticesSent(5000); // nothing left: at once
  });

  it("refuses a palace request naming its method, with -32601", () => {
    const error = methodNotFound("sampling/createMessage");
    assert.equal(error.message, "Method not found: sampling/createMessage");
    assert.equal(error.code, -32601);
  });
});

const text = (body: unknown, isError = false): CallToolResult => ({ content: [{ type: "text", text: JSON.stringify(body) }], isError });

describe("mailbox (MAIL-*)", () => {
  const me = "pi@box-a";
  it("owes what is addressed to me, open, and not closed by a later terminal reply of mine", () => {
    const inbox = [
      { id: "e1", seq: 1, to_agent: me, status: "open" },
      { id: "e2", seq: 2, to_agent: me, status: "open", correlation_id: "c2" },
      { id: "e3", seq: 3, to_agent: me, status: "open" },
      { id: "e4", seq: 4, to_agent: "*", status: "open" },
      { id: "e5", seq: 5, to_agent: me, status: "applied" },
    ];
    const mine = [
      { id: "r1", seq: 10, from_agent: me, status: "applied", metadata: { ack_of: "e1" } },
      { id: "r2", seq: 11, from_agent: me, status: "open", correlation_id: "c2" },
      { id: "r3", seq: 0, from_agent: me, status: "applied", metadata: { ack_of: "e3" } },
    ];
    assert.deepEqual(owed(me, inbox, mine).map((e) => e.id), ["e2", "e3"]);
    assert.match(formatItems(me, owed(me, inbox, mine)), /^2 event\(s\) addressed to pi@box-a/);
  });

  it("polls past the floor only, and delivers each item once per session; failures are silent", async () => {
    let now = 0;
    const events = [{ id: "e1", seq: 1, to_agent: me, status: "open", body: "please" }];
    let answer: CallToolResult = text({ events });
    const calls: string[] = [];
    const mailbox = new Mailbox(async (name, args) => {
      calls.push(`${name}:${JSON.stringify(args)}`);
      return answer;
    }, me, 1000, () => now);
    const steered: string[] = [];
    const details: MailDetails[] = [];
    const steer = async (body: string, carried: MailDetails) => { steered.push(body); details.push(carried); };
    assert.equal(mailbox.due(), true);
    await mailbox.poll(steer);
    assert.equal(steered.length, 1);
    // what pi's message `details` carries: to whom, the ids, the events delivered
    assert.deepEqual(details, [{ to_agent: me, event_ids: ["e1"], events }]);
    assert.equal(calls.length, 2);
    now = 999;
    assert.equal(mailbox.due(), false);
    await mailbox.poll(steer);
    assert.equal(calls.length, 2);
    now = 1000;
    await mailbox.poll(steer);
    assert.equal(steered.length, 1); // nothing new
    answer = text({ error: "boom" });
    now = 5000;
    await mailbox.poll(steer);
    assert.equal(steered.length, 1);
    assert.equal(failed(text({ success: false })), true);
    assert.equal(failed(text({ error: "x", success: true })), false);
  });
});

describe("redaction (HTTP-01)", () => {
  it("replaces every secret at any depth, keys included", () => {
    assert.deepEqual(redact({ a: ["tok", { tok: "x tok y" }] }, ["tok"]), { a: ["<redacted>", { "<redacted>": "x <redacted> y" }] });
    assert.equal(redact("tok", [""]), "tok");
  });
});
