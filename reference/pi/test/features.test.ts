/** Features over in-memory fakes: provenance, owed-ness, feeding's coalescing and window, wake-up. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PalaceCaller } from "../src/client.ts";
import { PalaceToolError, PalaceTimeout } from "../src/errors.ts";
import { diaryPrompt, diaryTopic } from "../../seed-policy/diary.ts";
import { type ExecResult, Feeder, mineSource } from "../src/features/feeding.ts";
import { formatItems, Mailbox, owed } from "../src/features/mailbox.ts";
import { stamperFor } from "../../seed-policy/provenance.ts";
import { WakeUp } from "../src/features/wakeup.ts";
import type { ToolResult } from "../src/tools.ts";
import { FakeClock } from "./fake-clock.ts";

const text = (body: unknown, isError = false): ToolResult => ({ content: [{ type: "text", text: JSON.stringify(body) }], isError });

class ScriptedCaller implements PalaceCaller {
  calls: Array<{ name: string; args: Record<string, unknown>; timeoutMs?: number }> = [];
  answer: (name: string) => Promise<ToolResult> = async () => text({ success: true });

  callTool(name: string, args: Record<string, unknown>, timeoutMs?: number): Promise<ToolResult> {
    this.calls.push({ name, args, timeoutMs });
    return this.answer(name);
  }
}

describe("provenance (PROV-*)", () => {
  it("stamps unset writers and the diary prefix on a shared palace", () => {
    const stamper = stamperFor("box", true);
    assert.deepEqual(stamper.stamp("mempalace_add_drawer", { content: "x" }), { content: "x", added_by: "pi@box" });
    assert.deepEqual(stamper.stamp("mempalace_mine", { source: "/s", agent: " " }), { source: "/s", agent: "pi@box" });
    assert.deepEqual(stamper.stamp("mempalace_event_append", {}), { from_agent: "pi@box" });
    assert.deepEqual(stamper.stamp("mempalace_artifact_put", {}), { created_by: "pi@box" });
    assert.deepEqual(stamper.stamp("mempalace_diary_write", { agent_name: "pi", entry: "hi" }), { agent_name: "pi", entry: "HOST:box|hi" });
    assert.deepEqual(stamper.stamp("mempalace_diary_write", { content: "hi" }), { content: "HOST:box|hi" });
  });

  it("keeps an explicit writer and an already attributed diary entry (PROV-02)", () => {
    const stamper = stamperFor("box", true);
    const explicit = { added_by: "someone" };
    assert.equal(stamper.stamp("mempalace_checkpoint", explicit), explicit);
    const marked = { entry: "HOST:other|x" };
    assert.equal(stamper.stamp("mempalace_diary_write", marked), marked);
  });

  it("passes arguments through as the same object when a gate is missing (PROV-03)", () => {
    const args = { content: "x" };
    assert.equal(stamperFor("box", false).stamp("mempalace_add_drawer", args), args);
    assert.equal(stamperFor(undefined, true).stamp("mempalace_add_drawer", args), args);
  });
});

describe("mailbox owed-ness (MAIL-02..04)", () => {
  const me = "pi@box";
  const ask = { id: "e1", seq: 5, to_agent: me, from_agent: "pi@other", status: "open", correlation_id: "c1" };

  it("an open ask to me is owed until my terminal reply with a higher seq joins it", () => {
    assert.deepEqual(owed(me, [ask], []).map((e) => e.id), ["e1"]);
    const ack = { id: "r1", seq: 6, from_agent: me, status: "applied", metadata: { ack_of: "e1" } };
    assert.deepEqual(owed(me, [ask], [ack]), []);
    const byCorrelation = { id: "r2", seq: 9, from_agent: me, status: "failed", correlation_id: "c1" };
    assert.deepEqual(owed(me, [ask], [byCorrelation]), []);
  });

  it("a reply with a lower seq, a non-terminal status or no join answers nothing", () => {
    const early = { id: "r1", seq: 4, from_agent: me, status: "applied", metadata: { ack_of: "e1" } };
    const sameSeq = { id: "r0", seq: 5, from_agent: me, status: "applied", correlation_id: "c1" };
    assert.deepEqual(owed(me, [ask], [sameSeq]).map((e) => e.id), ["e1"]); // strictly higher only
    const pending = { id: "r2", seq: 7, from_agent: me, status: "open", metadata: { ack_of: "e1" } };
    const unrelated = { id: "r3", seq: 8, from_agent: me, status: "applied", correlation_id: "c9" };
    assert.deepEqual(owed(me, [ask], [early, pending, unrelated]).map((e) => e.id), ["e1"]);
  });

  it("broadcasts are never owed and the result is ordered by seq, deduplicated", () => {
    const broadcast = { ...ask, id: "b", to_agent: "*" };
    const later = { ...ask, id: "e0", seq: 9 };
    assert.deepEqual(owed(me, [later, ask, broadcast, ask], []).map((e) => e.id), ["e1", "e0"]);
    assert.match(formatItems(me, owed(me, [ask], [])), /^1 event\(s\) addressed to pi@box/);
  });
});

const settings = { enabled: true, bin: "prep", wing: "wing_w", debounceMs: 1000, prepareTimeoutMs: 500,
  mineTimeoutMs: 300, remote: false };

describe("feeding (FEED-*)", () => {

  it("reads the last MINE_SOURCE line, paths with '=' kept", () => {
    assert.equal(mineSource("log\nMINE_SOURCE=/a\nMINE_SOURCE=/b=c\n"), "/b=c");
    assert.equal(mineSource("MINE_SOURCE=\nnothing"), undefined);
  });

  it("prepares then mines with the wing; the window holds agent_settled back", async () => {
    const clock = new FakeClock();
    const caller = new ScriptedCaller();
    const runs: string[][] = [];
    const exec = async (command: string, args: string[]): Promise<ExecResult> => {
      runs.push([command, ...args]);
      return { stdout: "MINE_SOURCE=/tmp/x\n", stderr: "", code: 0, killed: false };
    };
    const feeder = new Feeder(settings, exec, caller, stamperFor(undefined, false), clock, () => undefined);
    assert.equal(await feeder.settled(), "mined");
    assert.deepEqual(runs[0], ["prep", "--prepare", "--reason", "agent_settled", "--wing", "wing_w"]);
    assert.deepEqual(caller.calls[0], { name: "mempalace_mine", args: { source: "/tmp/x", wing: "wing_w" }, timeoutMs: 300 });
    clock.advance(999);
    assert.equal(feeder.settled(), undefined);
    clock.advance(1);
    assert.equal(await feeder.settled(), "mined");
  });

  it("a shutdown during a running feed joins it: one prepare, one mine (FEED-08)", async () => {
    const caller = new ScriptedCaller();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let runs = 0;
    const exec = async (): Promise<ExecResult> => {
      runs += 1;
      await gate;
      return { stdout: "MINE_SOURCE=/x", stderr: "", code: 0, killed: false };
    };
    const feeder = new Feeder(settings, exec, caller, stamperFor(undefined, false), new FakeClock(), () => undefined);
    const settled = feeder.settled();
    const shutdown = feeder.shutdown();
    release();
    assert.equal(await settled, "mined");
    assert.equal(await shutdown, "mined");
    assert.equal(runs, 1);
    assert.equal(caller.calls.length, 1);
  });

});

describe("feeding's mine cap at its far edge (FEED-06)", () => {
  it("a cap of 2^31-1 ms is a long guard, not a timer overflow that abandons the mine", async () => {
    const caller = new ScriptedCaller();
    const answer = caller.answer;
    caller.answer = async (name: string) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return answer(name);
    };
    const exec = async (): Promise<ExecResult> => ({ stdout: "MINE_SOURCE=/x", stderr: "", code: 0, killed: false });
    const lines: string[] = [];
    const huge = { ...settings, mineTimeoutMs: 2 ** 31 - 1 };
    const feeder = new Feeder(huge, exec, caller, stamperFor(undefined, false), new FakeClock(), (line) => lines.push(line));
    assert.equal(await feeder.shutdown(), "mined");
    assert.deepEqual(lines, []);
  });
});

describe("feeding's failures (FEED-*)", () => {
  it("a refused mine is reported and leaves the window open (FEED-10)", async () => {
    const caller = new ScriptedCaller();
    caller.answer = async () => { throw new PalaceToolError(-32001, "palace is held by PID 1"); };
    const lines: string[] = [];
    const exec = async (): Promise<ExecResult> => ({ stdout: "MINE_SOURCE=/x", stderr: "", code: 0, killed: false });
    const feeder = new Feeder(settings, exec, caller, stamperFor(undefined, false), new FakeClock(), (l) => lines.push(l));
    assert.equal(await feeder.settled(), "mine_refused");
    assert.match(lines[0] ?? "", /another writer holds the palace \(-32001\)/);
    assert.equal(await feeder.settled(), "mine_refused"); // not debounced: nothing was filed
  });

  it("a killed prepare mines nothing; no source mines nothing; remote without ssh target says so once", async () => {
    const caller = new ScriptedCaller();
    const killed = new Feeder(settings, async () => ({ stdout: "MINE_SOURCE=/x", stderr: "", code: 143, killed: true }),
      caller, stamperFor(undefined, false), new FakeClock(), () => undefined);
    assert.equal(await killed.settled(), "prepare_timeout");
    const empty = new Feeder(settings, async () => ({ stdout: "nothing new\n", stderr: "", code: 0, killed: false }),
      caller, stamperFor(undefined, false), new FakeClock(), () => undefined);
    assert.equal(await empty.settled(), "nothing");
    assert.equal(caller.calls.length, 0);
    const lines: string[] = [];
    const remote = new Feeder({ ...settings, remote: true }, async () => { throw new Error("must not run"); },
      caller, stamperFor(undefined, false), new FakeClock(), (l) => lines.push(l));
    assert.equal(remote.settled(), undefined);
    assert.equal(await remote.shutdown(), undefined);
    assert.equal(lines.length, 1);
    assert.match(lines[0] ?? "", /MEMPALACE_PI_SSH_TARGET/);
  });

  it("a mine timeout fails that feed, reported (FEED-06)", async () => {
    const caller = new ScriptedCaller();
    caller.answer = async () => { throw new PalaceTimeout("tools/call", 300); };
    const lines: string[] = [];
    const feeder = new Feeder(settings, async () => ({ stdout: "MINE_SOURCE=/x", stderr: "", code: 0, killed: false }),
      caller, stamperFor(undefined, false), new FakeClock(), (l) => lines.push(l));
    assert.equal(await feeder.shutdown(), "mine_failed");
    assert.match(lines[0] ?? "", /timed out after 300 ms/);
  });
});

describe("wake-up (WAKE-*)", () => {
  it("injects once per fresh session, never on resume, nothing on failure", async () => {
    const caller = new ScriptedCaller();
    caller.answer = async (name) => text({ tool: name });
    const wakeup = new WakeUp(caller, "pi");
    wakeup.sessionStart("startup");
    const message = await wakeup.beforeAgentStart();
    assert.equal(message?.customType, "mempalace-wakeup");
    assert.match(message?.content ?? "", /mempalace_status[\s\S]*mempalace_diary_read/);
    assert.deepEqual(caller.calls.map((c) => [c.name, c.args]), [["mempalace_status", {}], ["mempalace_diary_read", { agent_name: "pi" }]]);
    assert.equal(await wakeup.beforeAgentStart(), undefined);
    wakeup.sessionStart("resume");
    assert.equal(await wakeup.beforeAgentStart(), undefined);
    caller.answer = async () => text({ success: false }, false);
    wakeup.sessionStart("new");
    assert.equal(await wakeup.beforeAgentStart(), undefined);
  });
});

describe("diary (DIARY-01)", () => {
  it("asks for one diary_write as the agent, with the topic when given", () => {
    assert.match(diaryPrompt("pi", undefined), /mempalace_diary_write tool once, with agent_name="pi"/);
    assert.match(diaryPrompt("pi-laptop", diaryTopic("  the   release ")), /topic="the release"/);
    assert.equal(diaryTopic("   "), undefined);
  });
});

describe("mailbox delivery (MAIL-05, MAIL-06)", () => {
  it("sends both queries, fails silently on a bad answer, delivers an item once, floors the poll", async () => {
    const clock = new FakeClock();
    const caller = new ScriptedCaller();
    caller.answer = async () => text("event log unavailable", true);
    const steered: string[][] = [];
    const mailbox = new Mailbox(caller, "pi@box", 300, clock, (type, _content, details) =>
      steered.push([type, ...(details.event_ids as string[])]));
    assert.equal(await mailbox.wakeupSection(), undefined);
    assert.deepEqual(caller.calls.map((c) => c.args), [{ to_agent: "pi@box", status: "open", limit: 200 }, { writer: "pi@box", limit: 200 }]);
    const ask = { id: "e1", seq: 1, to_agent: "pi@box", from_agent: "pi@o", status: "open" };
    caller.answer = async () => text({ events: [ask] });
    assert.equal(mailbox.due(), false);
    await mailbox.poll();
    assert.deepEqual(steered, []);
    clock.advance(300);
    await mailbox.poll();
    clock.advance(300);
    await mailbox.poll();
    assert.deepEqual(steered, [["mempalace-mailbox", "e1"]]);
  });
});
