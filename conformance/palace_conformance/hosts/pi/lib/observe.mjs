// What a bridge looks at (DRIVER.md `introspect.observed`), so `palace-conformance profile init`
// can draft a bridge profile: the environment variables it reads, the files under HOME it reads,
// opens or checks, and (with lib/children.mjs) the programs it tries to start.
//
// Only names and paths are kept: never a variable's value, never a file's content (a token lives
// in both). A read counts only when the code doing it is the bridge's: the frame that touched
// `process.env` or called `fs` must be neither Node's own (`node:`) nor this host's (its
// directory, its node_modules), unless it lies in the bridge's own directory. So the host's
// bookkeeping, jiti loading the file and Node copying the environment into a child are not
// counted. A whole-environment copy made by the bridge itself (`{...process.env}`, a `for...in`)
// is not a read of every name either: after an enumeration, reads that walk the listed names in
// order are taken as the copy and skipped.

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const fs = process.getBuiltinModule("node:fs");
const { syncBuiltinESMExports } = process.getBuiltinModule("node:module");
const os = process.getBuiltinModule("node:os");
const path = process.getBuiltinModule("node:path");
const { fileURLToPath } = process.getBuiltinModule("node:url");

const envReads = new Set();
const fileOps = new Map(); // path relative to HOME -> Set of ops
let realEnv;
let hostDirs = [];
let bridgeDirs = [];
let installed = false;

function fileOf(site) {
  const name = site?.getFileName?.();
  if (typeof name !== "string" || name === "") return undefined;
  if (name.startsWith("file://")) {
    try {
      return fileURLToPath(name);
    } catch {
      return undefined;
    }
  }
  return name;
}

function inside(file, dirs) {
  return dirs.some((dir) => file === dir || file.startsWith(dir + path.sep));
}

/** Whether the code that called `fn` (the trap or wrapper) is the bridge's. */
function calledByBridge(fn) {
  const savedPrepare = Error.prepareStackTrace;
  const savedLimit = Error.stackTraceLimit;
  const holder = {};
  try {
    Error.stackTraceLimit = 2;
    Error.prepareStackTrace = (_error, sites) => sites;
    Error.captureStackTrace(holder, fn);
    const sites = holder.stack;
    const file = Array.isArray(sites) ? fileOf(sites[0]) : undefined;
    if (file === undefined || file.startsWith("node:")) return false;
    if (inside(file, bridgeDirs)) return true;
    return !inside(file, hostDirs);
  } catch {
    return false;
  } finally {
    Error.prepareStackTrace = savedPrepare;
    Error.stackTraceLimit = savedLimit;
  }
}

function observeEnvironment() {
  realEnv = process.env;
  let copying = null; // {keys, next}: an enumeration whose in-order reads are a copy
  const handler = {
    get(target, key) {
      if (typeof key === "string") {
        if (copying && copying.keys[copying.next] === key) {
          copying.next += 1;
          if (copying.next >= copying.keys.length) copying = null;
        } else {
          copying = null;
          if (!envReads.has(key) && calledByBridge(handler.get)) envReads.add(key);
        }
      }
      return Reflect.get(target, key);
    },
    // straight to the real object: process.env takes only full data descriptors, which a set
    // through a Proxy (receiver = the Proxy) does not give for a variable that exists
    set(target, key, value) {
      return Reflect.set(target, key, value);
    },
    has(target, key) {
      if (typeof key === "string" && !envReads.has(key) && calledByBridge(handler.has)) envReads.add(key);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      const keys = Reflect.ownKeys(target);
      const names = keys.filter((key) => typeof key === "string");
      const copy = names.length > 0 ? { keys: names, next: 0 } : null;
      copying = copy;
      // a copy is synchronous: whatever was not read by the end of this tick was no copy
      queueMicrotask(() => { if (copying === copy) copying = null; });
      return keys;
    },
  };
  process.env = new Proxy(realEnv, handler);
}

let homeSeen = { from: undefined, dir: undefined }; // every fs call asks: resolved once per HOME

function homeDir() {
  const home = realEnv?.HOME;
  if (home === homeSeen.from && homeSeen.dir !== undefined) return homeSeen.dir;
  const dir = path.resolve(typeof home === "string" && home !== "" ? home : os.homedir());
  homeSeen = { from: home, dir };
  return dir;
}

/** `target` relative to HOME ("a/b.json"), or undefined when it is no path inside HOME. */
function homeRelative(target) {
  let text;
  try {
    if (typeof target === "string") text = target;
    else if (Buffer.isBuffer(target)) text = target.toString("utf8");
    else if (target instanceof URL && target.protocol === "file:") text = fileURLToPath(target);
    else return undefined; // a descriptor or something else: no path to report
  } catch {
    return undefined;
  }
  const home = homeDir();
  const absolute = path.resolve(text);
  if (absolute === home || !absolute.startsWith(home + path.sep)) return undefined;
  return path.relative(home, absolute).split(path.sep).join("/");
}

function recordPath(relative, op) {
  if (!fileOps.has(relative)) fileOps.set(relative, new Set());
  fileOps.get(relative).add(op);
}

const FS_CALLS = {
  readFileSync: "read", readFile: "read", createReadStream: "read",
  existsSync: "exists", exists: "exists",
  statSync: "stat", stat: "stat", lstatSync: "stat", lstat: "stat",
  accessSync: "exists", access: "exists",
  openSync: "open", open: "open",
};
const PROMISE_CALLS = { readFile: "read", stat: "stat", lstat: "stat", access: "exists", open: "open" };

function wrapCalls(target, calls) {
  for (const [name, op] of Object.entries(calls)) {
    const original = target[name];
    if (typeof original !== "function") continue;
    const wrapper = function observedFs(...args) {
      const relative = homeRelative(args[0]); // first: cheaper than looking at the stack
      if (relative !== undefined && !fileOps.get(relative)?.has(op) && calledByBridge(wrapper)) {
        recordPath(relative, op);
      }
      return original.apply(this, args);
    };
    Object.defineProperties(wrapper, Object.getOwnPropertyDescriptors(original));
    target[name] = wrapper;
  }
}

/**
 * Start observing (once, before the extension is imported). `hostDirs`: code there is the
 * host's; `bridgeDirs`: code there is the bridge's even inside a host directory (an extension
 * installed next to the host's packages, such as pi-mcp-adapter).
 */
export function startObserving({ host = [], bridge = [] }) {
  hostDirs = host.map((dir) => path.resolve(dir));
  bridgeDirs = bridge.map((dir) => path.resolve(dir));
  if (installed) return;
  installed = true;
  observeEnvironment();
  wrapCalls(fs, FS_CALLS);
  wrapCalls(fs.promises, PROMISE_CALLS);
  syncBuiltinESMExports(); // `import { readFileSync } from "node:fs"` sees the wrappers too
}

/** `{env_reads, files}` so far: sorted names, and `{path, ops}` relative to HOME. */
export function observedReads() {
  return {
    env_reads: [...envReads].sort(),
    files: [...fileOps].sort(([a], [b]) => a.localeCompare(b))
      .map(([file, ops]) => ({ path: file, ops: [...ops].sort() })),
  };
}
