/** Framing, classification and redaction: the parts of the transports that are plain functions. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PalaceToolError, redactError, SplitSecretGuard } from "../src/errors.ts";
import { answerServerRequest, LineDecoder, LineTooLong, parse } from "../src/jsonrpc.ts";
import { translate, urlProblem } from "../src/remote.ts";
import { McpError, McpHttpError, McpTimeoutError } from "@earendil-works/pi-mcp";

describe("line framing (STDIO-13)", () => {
  it("splits across chunks, drops blank lines and a trailing CR", () => {
    const decoder = new LineDecoder();
    assert.deepEqual(decoder.feed(Buffer.from('{"a":1}\r\n\n{"b"')), ['{"a":1}']);
    assert.deepEqual(decoder.feed(Buffer.from(":2}\n")), ['{"b":2}']);
    assert.equal(decoder.pending, 0);
  });

  it("caps an unterminated line", () => {
    const decoder = new LineDecoder(8);
    assert.throws(() => decoder.feed(Buffer.from("0123456789")), LineTooLong);
  });

  it("classifies malformed lines instead of throwing, and answers server requests", () => {
    assert.equal(parse("not json").kind, "invalid");
    assert.equal(parse('{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}').kind, "invalid");
    assert.deepEqual(parse('{"jsonrpc":"2.0","id":"7","result":{}}'), { kind: "response", id: "7", result: {} });
    assert.deepEqual(answerServerRequest(3, "ping"), { jsonrpc: "2.0", id: 3, result: {} });
    assert.equal((answerServerRequest(4, "sampling/createMessage").error as { code: number }).code, -32601);
  });
});

describe("redaction (HTTP-01)", () => {
  it("replaces a token cut across chunks", () => {
    const guard = new SplitSecretGuard(["s3cret-token"]);
    const out = guard.feed("auth s3cr") + guard.feed("et-token ok\ntail s3") + guard.flush();
    assert.equal(out, "auth <redacted> ok\ntail s3");
  });

  it("scrubs an error's message and nested data", () => {
    const error = redactError(new PalaceToolError(-32000, "bad tok", { nested: ["tok"] }), ["tok"]);
    assert.equal(error.message, "bad <redacted>");
    assert.deepEqual(error.data, { nested: ["<redacted>"] });
  });
});

describe("pi-mcp errors as the seed copy's kinds", () => {
  it("keeps codes, statuses and timeouts", () => {
    assert.equal(translate(new McpTimeoutError(300), "tools/call", 300).name, "PalaceTimeout");
    const rpc = translate(new McpError(-32602, "Unknown parameter", { field: "agent" }), "tools/call", 1);
    assert.ok(rpc instanceof PalaceToolError);
    assert.deepEqual([rpc.code, rpc.message, rpc.data], [-32602, "Unknown parameter", { field: "agent" }]);
    const http = translate(new McpHttpError(502, "bad gateway", '{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}'), "tools/call", 1);
    assert.deepEqual([http.name, (http as { status?: number }).status, (http as { code?: number }).code], ["PalaceHttpError", 502, -32603]);
    assert.equal(translate(new McpHttpError(202, "accepted without a response"), "tools/call", 1).name, "PalaceProtocolError");
    assert.equal(translate(new McpError(-32603, "MCP response stream failed: stream ended without a response"), "tools/call", 1).name,
      "PalaceProtocolError");
  });

  it("names what is wrong with a remote URL without echoing it", () => {
    assert.equal(urlProblem("https://palace.example/mcp"), undefined);
    assert.equal(urlProblem("ftp://x/mcp"), "must start with http:// or https://");
    assert.equal(urlProblem("not a url"), "is not a valid URL");
  });
});

describe("pi-mcp's verdicts on broken answers are protocol errors", () => {
  it("an invalid JSON-RPC message and a refused resumption read as the exchange breaking", () => {
    assert.equal(translate(new McpError(-32600, "Invalid JSON-RPC message"), "tools/call", 1).name, "PalaceProtocolError");
    const resumed = translate(new McpError(-32603, "MCP response stream failed: MCP HTTP 500: boom"), "tools/call", 1);
    assert.equal(resumed.name, "PalaceProtocolError");
    assert.doesNotMatch(resumed.message, /HTTP\s*\d{3}/);
    assert.match(resumed.message, /answered 500/);
  });
});
