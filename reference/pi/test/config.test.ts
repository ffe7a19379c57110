import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULTS, parsePreamble, readConfig, sharedPalace } from "../src/config.ts";

describe("config", () => {
  it("has the seed's defaults (KNOB-01)", () => {
    const config = readConfig({});
    assert.equal(config.timeoutMs, 60000);
    assert.equal(config.initTimeoutMs, 300000);
    assert.equal(config.maxRespawns, 2);
    assert.equal(config.respawnBackoffMs, 1000);
    assert.equal(config.feed, true);
    assert.equal(config.feedBin, "mempalace-pi-session");
    assert.equal(config.feedWing, "wing_conversations");
    assert.equal(config.feedDebounceMs, 600000);
    assert.equal(config.feedPrepareTimeoutMs, 120000);
    assert.equal(config.feedMineTimeoutMs, 30000);
    assert.equal(config.mailboxPollMs, 300000);
    assert.equal(config.agentName, "pi");
    assert.equal(config.remoteUrl, undefined);
    assert.deepEqual(config.warnings, []);
  });

  it("falls back to the default with one warning naming the variable (KNOB-02)", () => {
    const config = readConfig({ MEMPALACE_MCP_TIMEOUT_MS: "soon", MEMPALACE_MCP_MAX_RESPAWNS: "-1", MEMPALACE_FEED_DEBOUNCE_MS: " 5 " });
    assert.equal(config.timeoutMs, DEFAULTS.timeoutMs);
    assert.equal(config.maxRespawns, DEFAULTS.maxRespawns);
    assert.equal(config.feedDebounceMs, 5);
    assert.deepEqual(config.warnings, [
      "mempalace: ignoring MEMPALACE_MCP_TIMEOUT_MS='soon' (expected a non-negative integer); using the default 60000",
      "mempalace: ignoring MEMPALACE_MCP_MAX_RESPAWNS='-1' (expected a non-negative integer); using the default 2",
    ]);
  });

  it("reads the switches and both provenance gates", () => {
    const config = readConfig({ MEMPALACE_FEED: "0", MEMPALACE_MAILBOX: "off", MEMPALACE_EXT_DEBUG: "1",
      MEMPALACE_PI_DEVICE: "box", MEMPALACE_REMOTE_URL: "http://127.0.0.1:1/mcp" });
    assert.equal(config.feed, false);
    assert.equal(config.mailbox, false);
    assert.equal(config.debug, true);
    assert.equal(sharedPalace(config), true);
    assert.equal(sharedPalace(readConfig({ MEMPALACE_PI_DEVICE: "box" })), false);
  });

  it("takes a well-formed session preamble and warns about a malformed one", () => {
    assert.deepEqual(parsePreamble('{"tool": "mode_select", "arguments": {"mode": "x"}}'), { tool: "mode_select", arguments: { mode: "x" } });
    assert.deepEqual(parsePreamble('{"tool": "t"}'), { tool: "t", arguments: {} });
    for (const bad of ["nope", "[]", '{"tool": ""}', '{"tool": "t", "arguments": []}']) assert.equal(parsePreamble(bad), undefined);
    const config = readConfig({ MEMPALACE_SESSION_PREAMBLE: "{" });
    assert.equal(config.preamble, undefined);
    assert.equal(config.warnings.length, 1);
  });
});
