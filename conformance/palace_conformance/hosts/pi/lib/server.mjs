// The host side of driver protocol v1: one JSON request per stdin line, one reply each.
//
// Requests are handled strictly in order. Every op races its deadline (`timeout_ms`, default
// 30 s): when the bridge hangs the reply is `host_timeout` and the host stays usable, while the
// abandoned op keeps running in the background (JavaScript cannot cancel a promise).

import { killChildren } from "./children.mjs";
import { adopt, POOLED } from "./environment.mjs";
import { classify, OpError } from "./errors.mjs";
import { guardOutput, hostLog, protocolChannel } from "./output.mjs";
import { Recorder } from "./recorder.mjs";

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const { performance } = process.getBuiltinModule("node:perf_hooks");
const readline = process.getBuiltinModule("node:readline");

export const PROTOCOL = 1;
export const DEFAULT_TIMEOUT_MS = 30000;

/** Command-line flags `--name value` (and bare `--flag`) into an object. */
export function parseArgs(argv) {
  const options = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith("--")) continue;
    const [name, inline] = arg.slice(2).split(/=(.*)/s, 2);
    if (inline !== undefined) options[name] = inline;
    else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) options[name] = argv[++i];
    else options[name] = true;
  }
  return options;
}

/**
 * Driver op `abandon`: the process just ends, as a harness does when it is ended without a quit of
 * its own. No `session_shutdown`, no close and no last-resort kill of the children: only Node's
 * ordinary exit runs (`process.on("exit")` handlers), so what is left is what the bridge left.
 */
function abandon() {
  process.exit(0);
}

/**
 * Serve the protocol. `makeOps(recorder)` returns `{ops: {name: async (request) => result},
 * close: async () => void}`; `exit`, `abandon` and unknown ops are handled here.
 *
 * A pooled host (environment.mjs; the runner starts a few ahead of need) first runs `preload`
 * (imports every run makes, so they are in Node's module cache before a run waits on them) and
 * then takes one request alone: `adopt`, its run's environment and directory. Until then it
 * answers nothing else, and the adopt reply carries no effects: whatever the host recorded
 * before stays for the first reply of its run, as a host started for the run would give it.
 */
export async function serve({ protocolFd = 1, makeOps, preload }) {
  const recorder = new Recorder();
  const flushPartial = guardOutput(recorder);
  const channel = protocolChannel(protocolFd);
  const { ops, close } = await makeOps(recorder);
  let adopted = !POOLED;
  if (POOLED && preload) {
    // a failed preload costs nothing but its time: the run imports the same modules itself
    await preload().catch(() => undefined);
  }
  let closing;
  const shutdown = (code) => {
    closing ??= (async () => {
      try {
        await Promise.race([close?.(), new Promise((resolve) => setTimeout(resolve, 5000))]);
      } catch (error) {
        hostLog(`cleanup failed: ${error?.message ?? error}`);
      }
      killChildren();
      process.exit(code);
    })();
    return closing;
  };
  process.on("SIGTERM", () => void shutdown(143));
  process.on("unhandledRejection", (reason) => {
    recorder.record("error", { where: "unhandled_rejection", message: classify(reason).message });
  });
  process.on("uncaughtException", (error) => {
    recorder.record("error", { where: "uncaught_exception", message: classify(error).message });
  });

  const reply = (id, started, outcome) => {
    flushPartial();
    const message = { id, ok: !("error" in outcome) };
    if (message.ok) message.result = outcome.result ?? null;
    else message.error = outcome.error;
    message.effects = recorder.take();
    message.ms = Math.round((performance.now() - started) * 1000) / 1000;
    channel.send(message);
  };

  const handle = async (line) => {
    const started = performance.now();
    let request;
    try {
      request = JSON.parse(line);
    } catch (error) {
      reply(null, started, { error: { kind: "bad_request", message: `request is not JSON: ${error.message}` } });
      return;
    }
    if (!request || typeof request !== "object" || Array.isArray(request)) {
      reply(null, started, { error: { kind: "bad_request", message: "a request is a JSON object" } });
      return;
    }
    const { id, op } = request;
    if (!adopted) {
      const refused = op === "adopt" ? adopt(request)
        : `a pooled host takes adopt first, not ${JSON.stringify(op)}`;
      if (refused !== undefined) {
        channel.send({ id, ok: false, error: { kind: "bad_request", message: refused }, effects: [] });
        await shutdown(2);
        return;
      }
      adopted = true;
      channel.send({ id, ok: true, result: null, effects: [] });
      return;
    }
    if (op === "exit") {
      reply(id, started, { result: null });
      await shutdown(0);
      return;
    }
    if (op === "abandon") {
      reply(id, started, { result: null });
      abandon();
      return;
    }
    const handler = typeof op === "string" && Object.hasOwn(ops, op) ? ops[op] : undefined;
    if (!handler) {
      reply(id, started, { error: { kind: "bad_request", message: `unknown op ${JSON.stringify(op)}` } });
      return;
    }
    let timeoutMs = request.timeout_ms;
    if (typeof timeoutMs !== "number" || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      timeoutMs = DEFAULT_TIMEOUT_MS;
    }
    let timer;
    const deadline = new Promise((resolve) => {
      timer = setTimeout(() => resolve({
        error: { kind: "host_timeout", message: `${op} did not finish within ${timeoutMs} ms` },
      }), timeoutMs);
    });
    const work = Promise.resolve()
      .then(() => handler(request))
      .then((result) => ({ result }), (error) => ({ error: classify(error) }));
    const outcome = await Promise.race([work, deadline]);
    clearTimeout(timer);
    reply(id, started, outcome);
  };

  let queue = Promise.resolve();
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  lines.on("line", (line) => {
    if (!line.trim()) return;
    queue = queue.then(() => handle(line)).catch((error) => hostLog(`reply failed: ${error?.stack ?? error}`));
  });
  lines.on("close", () => {
    queue.then(() => shutdown(0));
  });
}

export { OpError };
