// The `call_tools` op (DRIVER.md): several tool calls at once, as a harness that runs an assistant
// message's tool calls in parallel. Every call goes through the host's own `call_tool` path; the
// op answers when all have ended, one outcome per call in request order.

import { classify, OpError } from "./errors.mjs";

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const { performance } = process.getBuiltinModule("node:perf_hooks");

export const MIN_CALLS = 2;
export const MAX_CALLS = 8;

/** One call, bounded by its own `timeout_ms` when it has one: `{ok, result | error, ms}`. */
async function oneCall(callTool, call, id) {
  const started = performance.now();
  let timer;
  const work = Promise.resolve().then(() => callTool({ ...call, id }))
    .then((result) => ({ ok: true, result }), (error) => ({ ok: false, error: classify(error) }));
  const limit = call.timeout_ms;
  const bounded = typeof limit === "number" && Number.isFinite(limit) && limit > 0;
  const deadline = bounded ? new Promise((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, error: {
      kind: "host_timeout", message: `call did not finish within ${limit} ms` } }), limit);
  }) : null;
  const outcome = await (deadline ? Promise.race([work, deadline]) : work);
  clearTimeout(timer);
  return { ...outcome, ms: Math.round((performance.now() - started) * 1000) / 1000 };
}

/** The `call_tools` op over a host's `callTool(request)`: all calls started at once. */
export function callToolsWith(callTool) {
  return async (request) => {
    const calls = request.calls;
    if (!Array.isArray(calls) || calls.length < MIN_CALLS || calls.length > MAX_CALLS
      || !calls.every((call) => call && typeof call === "object" && !Array.isArray(call))) {
      throw new OpError("bad_request",
        `call_tools needs 'calls': ${MIN_CALLS} to ${MAX_CALLS} objects {name, args, timeout_ms?}`);
    }
    const outcomes = await Promise.all(calls.map((call, index) => oneCall(callTool, call, `${request.id}-${index}`)));
    return { calls: outcomes };
  };
}
