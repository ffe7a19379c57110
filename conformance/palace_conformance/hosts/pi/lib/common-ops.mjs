// The ops every host answers the same way, whatever bridge it loads: the environment a `load`
// hands the bridge, `set_env`, `settle`, and the children a host reports and stops.

import { callToolsWith } from "./call-tools.mjs";
import { children, killChildren, spawnAttempts, waitForChildren } from "./children.mjs";
import { observedReads } from "./observe.mjs";
import { OpError } from "./server.mjs";

export { replaceEnvironment } from "./environment.mjs";

export const DEFAULT_GRACE_MS = 5000;

/** `load`'s `env`: an object of strings, checked before anything else of the load happens. */
export function loadEnv(request) {
  const env = request.env;
  if (!env || typeof env !== "object" || Array.isArray(env)) {
    throw new OpError("bad_request", "load needs 'env': an object of strings");
  }
  return env;
}

/** `call_tool`'s tool, found by name among those the bridge registered (`tools`, a Map), and
 * its arguments, which must be an object: `no_such_tool` and `bad_request` otherwise. */
export function toolCall(request, tools) {
  const tool = tools.get(request.name);
  if (!tool) throw new OpError("no_such_tool", `no tool registered as ${JSON.stringify(request.name)}`);
  const input = request.args ?? {};
  if (typeof input !== "object" || Array.isArray(input)) {
    throw new OpError("bad_request", "call_tool 'args' must be an object");
  }
  return { tool, input };
}

/** `set_env`: set each variable, remove those given as null. */
export async function setEnv(request) {
  const changes = request.env;
  if (!changes || typeof changes !== "object" || Array.isArray(changes)) {
    throw new OpError("bad_request", "set_env needs 'env': an object");
  }
  for (const [key, value] of Object.entries(changes)) {
    if (value === null) delete process.env[key];
    else process.env[key] = String(value);
  }
  return null;
}

/** `settle` on one recorder: wait until its effects are quiet (or the most it may wait). */
export function settleOn(recorder) {
  return async (request) => {
    await recorder.settle(Number(request.quiet_ms ?? 200), Number(request.max_ms ?? 5000));
    return null;
  };
}

/** `introspect` of a host that loads the bridge's own code: its children, the API it touched
 * (`loaded.touched`, none before a load), what its code read and what it tried to spawn. */
export function introspectLoaded(loaded) {
  return {
    children: children(),
    api_touched: loaded ? [...loaded.touched].sort() : [],
    observed: { ...observedReads(), spawned: spawnAttempts() },
  };
}

/** `shutdown`'s answer once the bridge was told: which children outlived the grace period. */
export async function childrenAfter(request) {
  return { children_alive: await waitForChildren(Number(request.grace_ms ?? DEFAULT_GRACE_MS)) };
}

/** A host's last act: a short wait for the bridge's children, then none is left running. */
export async function stopChildren() {
  await waitForChildren(1000);
  killChildren();
}

/** What a host that loads one bridge object keeps: the recorder, the loaded object (`fake`, a
 * stand-in for the harness the bridge was loaded into) and whether it was told to shut down. */
export class LoadingHost {
  fake;
  shutDown = false;

  constructor(recorder, what) {
    this.recorder = recorder;
    this.what = what;
  }

  requireLoaded() {
    if (!this.fake) throw new OpError("bad_request", `load the ${this.what} first`);
    return this.fake;
  }

  /** A bridge loaded into a harness has no command-line program of its own: the runner reads
   * bad_request as "not applicable" (DRIVER.md, the cli op). */
  async cli() {
    throw new OpError("bad_request", `a ${this.what} loaded into a harness has no command-line program to run`);
  }
}

/** The driver ops of a host object, op by op its methods, with the ops every host answers
 * alike (`set_env`, `settle`, `call_tools` as calls in order); `introspect` defaults to
 * {@link introspectLoaded} of the host's loaded object. */
export function opsOf(host, recorder, introspect = () => introspectLoaded(host.fake)) {
  const callTool = (request) => host.callTool(request);
  return {
    ops: {
      hello: () => host.hello(), load: (request) => host.load(request),
      set_session: (request) => host.setSession(request), set_env: setEnv,
      event: (request) => host.event(request), list_tools: () => host.listTools(), call_tool: callTool,
      call_tools: callToolsWith(callTool), command: (request) => host.command(request),
      settle: settleOn(recorder), introspect: async () => introspect(),
      shutdown: (request) => host.shutdown(request), reload: () => host.reload(), cli: () => host.cli(),
    },
    close: () => host.close(),
  };
}
