// Which processes the bridge started (DRIVER.md `introspect.children`, `shutdown.children_alive`)
// and which programs it tried to start (`introspect.observed.spawned`, failures included).
//
// Every asynchronous spawn in Node (spawn, exec, execFile, fork, and cross-spawn on top of
// them) goes through `ChildProcess.prototype.spawn`, so one hook sees them all; the synchronous
// ones (spawnSync, execFileSync, execSync) are wrapped where the module exports them. Subprocesses
// the host runs on the bridge's behalf through `pi.exec` are not the bridge's children in this
// sense (they are reported as `exec` effects instead) and are excluded. A /proc scan adds any
// direct child the hook missed (for example one started by a native addon).
//
// A bridge child spawned with its stderr inherited (the official SDK's default) would write past
// the host's recorder of the bridge's stderr: the hook pipes it instead and passes each line on
// through `process.stderr.write`, so it is recorded as the bridge's stderr like any other line;
// a `spawnSync` child's too, once it has exited. `execFileSync` and `execSync` without `stdio`
// already pass their child's stderr through `process.stderr.write` (Node does so itself); with an
// explicitly inherited stderr, the child writes into an unlinked temporary file instead, passed on
// line by line once it has exited (a pipe would lose it: they return stdout alone).

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const childProcess = process.getBuiltinModule("node:child_process");
const fs = process.getBuiltinModule("node:fs");
const os = process.getBuiltinModule("node:os");
const { syncBuiltinESMExports } = process.getBuiltinModule("node:module");
const path = process.getBuiltinModule("node:path");
const util = process.getBuiltinModule("node:util");

const tracked = new Map(); // pid -> argv
const internal = new Set();
const attempts = []; // {argv, error?} for every start the bridge tried, in order
let suppress = 0;

function errorName(code) {
  if (typeof code === "string") return code;
  if (typeof code === "number" && code < 0) {
    try {
      return util.getSystemErrorName(code);
    } catch {
      return String(code);
    }
  }
  return "failed";
}

function attempted(argv, error) {
  if (suppress > 0) return;
  attempts.push(error === undefined ? { argv } : { argv, error });
}

/** The longest stderr line of a child kept whole before it is passed on in pieces. */
const LINE_CAP = 64 * 1024;

/** `options` with a bridge child's inherited stderr (`stdio: "inherit"`, `[.., .., "inherit"]`,
 * fd 2 or `process.stderr`: the official SDK's default) made a pipe; whether it was. What the
 * child writes there would bypass the host's recorder of the bridge's stderr (lib/output.mjs),
 * so the host reads the pipe itself and writes each line through `process.stderr.write`. */
function pipeInheritedStderr(options) {
  if (suppress > 0 || options === null || typeof options !== "object") return false;
  const stdio = options.stdio;
  if (stdio === "inherit") {
    options.stdio = ["inherit", "inherit", "pipe"];
    return true;
  }
  if (Array.isArray(stdio) && (stdio[2] === "inherit" || stdio[2] === 2 || stdio[2] === process.stderr)) {
    options.stdio = [...stdio];
    options.stdio[2] = "pipe";
    return true;
  }
  return false;
}

function forwardLines(stream) {
  let pending = "";
  stream.setEncoding("utf8");
  stream.on("data", (chunk) => {
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop();
    if (pending.length > LINE_CAP) {
      lines.push(pending);
      pending = "";
    }
    for (const line of lines) process.stderr.write(`${line}\n`);
  });
  stream.on("end", () => {
    if (pending) process.stderr.write(`${pending}\n`);
    pending = "";
  });
  stream.on("error", () => {});
}

/**
 * Program runs (a host without an exec API of its own, the OpenCode plugin host): a child the
 * bridge starts with its stdin not a pipe (`"ignore"`, as a program run for its output is
 * started; a palace child always gets a stdin pipe to speak MCP on) is reported to `onRun` as
 * pi's `exec` would record it, `{argv, exit_code, timed_out}`, when it ends, and is not counted
 * as a bridge child (as `pi.exec`'s are not). `exit_code` follows pi's convention: the status;
 * 128 + n for a death by signal n; 1 when the program could not start. `timed_out`: the bridge
 * itself signalled it (its own timeout), as pi's `killed` flags only exec's timeout.
 */
let programRuns;
/** Told of each program run as it starts, with a promise that settles when it is reported. */
let programStarts;

/**
 * Report the bridge's program runs to `onRun` (see `programRuns`); `onStart(ended)`, when given,
 * gets each run's end as a promise as soon as it starts (a host's `settle` waits for runs in
 * flight, as it does for pi's `exec`).
 */
export function observeProgramRuns(onRun, onStart) {
  programRuns = onRun;
  programStarts = onStart;
}

function stdinIgnored(options) {
  const stdio = options?.stdio;
  return stdio === "ignore" || (Array.isArray(stdio) && stdio[0] === "ignore");
}

const SIGNAL_NUMBERS = os.constants.signals;

function reportRun(child, argv) {
  let done = false;
  let signalled = false;
  const kill = child.kill;
  child.kill = function observedKill(...killArgs) {
    signalled = true;
    return kill.apply(this, killArgs);
  };
  let ended;
  programStarts?.(new Promise((resolve) => { ended = resolve; }));
  const report = (exitCode) => {
    if (done) return;
    done = true;
    programRuns?.({ argv, exit_code: exitCode, timed_out: signalled });
    ended?.();
  };
  child.on("error", () => report(1));
  child.on("close", (code, signal) => {
    report(code ?? (signal ? 128 + (SIGNAL_NUMBERS[signal] ?? 0) : 1));
  });
}

const originalSpawn = childProcess.ChildProcess.prototype.spawn;
childProcess.ChildProcess.prototype.spawn = function trackedSpawn(options) {
  const argv = Array.isArray(options?.args) ? [...options.args] : [String(options?.file)];
  if (programRuns && suppress === 0 && stdinIgnored(options)) {
    reportRun(this, argv);
    suppress += 1;
    try {
      return originalSpawn.call(this, options);
    } finally {
      suppress -= 1;
      if (typeof this.pid === "number") internal.add(this.pid);
    }
  }
  const piped = pipeInheritedStderr(options);
  let result;
  try {
    result = originalSpawn.call(this, options);
  } catch (error) {
    attempted(argv, errorName(error?.code));
    throw error;
  }
  if (piped && this.stderr) forwardLines(this.stderr);
  if (typeof this.pid === "number") {
    if (suppress > 0) internal.add(this.pid);
    else tracked.set(this.pid, argv);
  }
  attempted(argv, typeof this.pid === "number" ? undefined : errorName(result));
  return result;
};

function syncArgv(file, args) {
  return [String(file), ...(Array.isArray(args) ? args.map(String) : [])];
}

/** What a synchronous child wrote to the stderr it would have inherited, passed on line by line
 * through `process.stderr.write` (recorded as the bridge's stderr, like `forwardLines`). */
function forwardOutput(output) {
  if (output === null || output === undefined || output.length === 0) return;
  const lines = String(output).split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  for (const line of lines) process.stderr.write(`${line}\n`);
}

const originalSpawnSync = childProcess.spawnSync;
childProcess.spawnSync = function observedSpawnSync(file, args, options, ...rest) {
  // spawnSync(file, options) as well as spawnSync(file, args, options)
  const withArgs = Array.isArray(args);
  const given = withArgs ? options : args;
  const copy = given !== null && typeof given === "object" ? { ...given } : given;
  const piped = pipeInheritedStderr(copy);
  const result = withArgs
    ? originalSpawnSync.call(this, file, args, piped ? copy : options, ...rest)
    : originalSpawnSync.call(this, file, piped ? copy : args, options, ...rest);
  if (piped) forwardOutput(result?.stderr);
  attempted(syncArgv(file, args), result?.error ? errorName(result.error.code) : undefined);
  return result;
};

let captures = 0;

/** Run `start(options)` (an `execFileSync` or `execSync`) with an explicitly inherited stderr in
 * `options` sent to an unlinked temporary file instead, passed on line by line once the child
 * has exited, whether it succeeded or threw. These calls return stdout alone, so a pipe would
 * lose what the child wrote; a file keeps Node's own results and errors exactly as they were. */
function withInheritedStderrCaptured(options, start) {
  const copy = options !== null && typeof options === "object" ? { ...options } : options;
  if (!pipeInheritedStderr(copy)) return start(options);
  captures += 1;
  const file = path.join(os.tmpdir(), `palace-host-stderr-${process.pid}-${captures}`);
  const fd = fs.openSync(file, "wx+", 0o600);
  try {
    fs.unlinkSync(file);
    copy.stdio[2] = fd;
    try {
      return start(copy);
    } finally {
      const written = Buffer.alloc(fs.fstatSync(fd).size);
      fs.readSync(fd, written, 0, written.length, 0);
      forwardOutput(written);
    }
  } finally {
    fs.closeSync(fd);
  }
}

const originalExecFileSync = childProcess.execFileSync;
childProcess.execFileSync = function observedExecFileSync(file, args, options, ...rest) {
  // execFileSync(file, options) as well as execFileSync(file, args, options)
  const withArgs = Array.isArray(args);
  try {
    const output = withInheritedStderrCaptured(withArgs ? options : args, (given) => (withArgs
      ? originalExecFileSync.call(this, file, args, given, ...rest)
      : originalExecFileSync.call(this, file, given, options, ...rest)));
    attempted(syncArgv(file, args));
    return output;
  } catch (error) {
    attempted(syncArgv(file, args), typeof error?.code === "string" ? error.code : undefined);
    throw error;
  }
};

const originalExecSync = childProcess.execSync;
childProcess.execSync = function observedExecSync(command, options, ...rest) {
  try {
    const output = withInheritedStderrCaptured(
      options, (given) => originalExecSync.call(this, command, given, ...rest));
    attempted(["/bin/sh", "-c", String(command)]);
    return output;
  } catch (error) {
    attempted(["/bin/sh", "-c", String(command)], typeof error?.code === "string" ? error.code : undefined);
    throw error;
  }
};
syncBuiltinESMExports();

/** Every start the bridge tried, in order: `{argv}`, plus `error` (`ENOENT`, ...) when it failed. */
export function spawnAttempts() {
  return attempts.map((attempt) => ({ ...attempt, argv: [...attempt.argv] }));
}

/** Run `start` (which spawns synchronously) without counting what it spawns as a bridge child. */
export function spawnInternal(start) {
  suppress += 1;
  try {
    return start();
  } finally {
    suppress -= 1;
  }
}

function procArgv(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`).toString("utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

/** Running and not a zombie. */
export function isAlive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    return state !== "Z" && state !== "X";
  } catch {
    try {
      process.kill(pid, 0);
      return true;
    } catch (error) {
      return error.code === "EPERM";
    }
  }
}

/** The pids of this process's children as the kernel lists them per thread (Linux with
 * CONFIG_PROC_CHILDREN); undefined when it does not. Reading every process's stat instead costs a
 * file read per process on the machine, at every look. */
function listedChildren() {
  let threads;
  try {
    fs.accessSync(`/proc/self/task/${process.pid}/children`); // the main thread's: the list exists
    threads = fs.readdirSync("/proc/self/task");
  } catch {
    return undefined;
  }
  const pids = [];
  for (const thread of threads) {
    try {
      const text = fs.readFileSync(`/proc/self/task/${thread}/children`, "utf8").trim();
      if (text) pids.push(...text.split(" ").map(Number));
    } catch {
      // a thread that ended meanwhile
    }
  }
  return pids;
}

/** Every process whose parent is this one, from each process's stat. */
function scannedChildren() {
  let entries = [];
  try {
    entries = fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const pids = [];
  for (const name of entries) {
    const pid = Number(name);
    if (tracked.has(pid) || internal.has(pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === process.pid) pids.push(pid);
    } catch {
      // gone already
    }
  }
  return pids;
}

function scanDirectChildren() {
  for (const pid of listedChildren() ?? scannedChildren()) {
    if (!tracked.has(pid) && !internal.has(pid)) tracked.set(pid, procArgv(pid));
  }
}

/** `[{pid, argv, alive}]` for every bridge child seen so far, oldest first. */
export function children() {
  scanDirectChildren();
  return [...tracked].map(([pid, argv]) => ({ pid, argv, alive: isAlive(pid) }));
}

/** Wait up to `graceMs` for every bridge child to exit; the number still alive. */
export async function waitForChildren(graceMs) {
  const deadline = Date.now() + graceMs;
  for (;;) {
    const alive = children().filter((child) => child.alive).length;
    if (alive === 0 || Date.now() >= deadline) return alive;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Last resort at exit: SIGKILL every live bridge child (and its process group). */
export function killChildren() {
  for (const { pid, alive } of children()) {
    if (!alive) continue;
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, "SIGKILL");
      } catch {
        // not a group leader, or already gone
      }
    }
  }
}
