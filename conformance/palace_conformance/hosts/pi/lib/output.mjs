// Keeps the protocol channel clean (DRIVER.md: "stdout carries only protocol").
//
// The Python launcher starts a host as `sh -c 'exec 3>&1 1>&2; exec node host.mjs
// --protocol-fd 3'`, so file descriptor 1 already points at stderr: a subprocess that inherits
// stdout cannot corrupt a reply. Inside Node, `console.*`, `process.stdout.write` and
// `process.stderr.write` are rerouted through a sink that writes to the real stderr and records
// each complete line the bridge printed as a `stderr` effect.

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const fs = process.getBuiltinModule("node:fs");
const util = process.getBuiltinModule("node:util");

const realStderrWrite = process.stderr.write.bind(process.stderr);

/** A diagnostic line from the host itself (not the bridge): stderr only, never an effect. */
export function hostLog(message) {
  realStderrWrite(`[pi-host] ${message}\n`);
}

/** Writes one JSON line per reply on `fd`; handles short writes and a non-blocking pipe. */
export function protocolChannel(fd) {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  return {
    send(object) {
      const buffer = Buffer.from(`${encode(object)}\n`, "utf8");
      let offset = 0;
      while (offset < buffer.length) {
        try {
          offset += fs.writeSync(fd, buffer, offset, buffer.length - offset);
        } catch (error) {
          if (error.code !== "EAGAIN") throw error;
          Atomics.wait(pause, 0, 0, 2);
        }
      }
    },
  };
}

/** JSON for a reply; survives cycles, BigInt and other values JSON cannot hold. */
export function encode(object) {
  try {
    return JSON.stringify(object, plainReplacer);
  } catch {
    const seen = new WeakSet();
    return JSON.stringify(object, function replacer(key, value) {
      const plain = plainReplacer.call(this, key, value);
      if (plain && typeof plain === "object") {
        if (seen.has(plain)) return "[Circular]";
        seen.add(plain);
      }
      return plain;
    });
  }
}

function plainReplacer(key, value) {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  if (typeof value === "function" || typeof value === "symbol") return undefined;
  return value;
}

/** Reroute console and the std streams through `recorder` (as `stderr` effects). */
export function guardOutput(recorder) {
  const pending = { out: "", err: "" };
  const emit = (text, stream) => {
    realStderrWrite(text);
    pending[stream] += text;
    const lines = pending[stream].split("\n");
    pending[stream] = lines.pop();
    for (const line of lines) recorder.record("stderr", { line: line.replace(/\r$/, "") });
  };
  const writer = (stream) => function write(chunk, encoding, callback) {
    const text = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString(
      typeof encoding === "string" ? encoding : "utf8");
    emit(text, stream);
    const done = typeof encoding === "function" ? encoding : callback;
    if (typeof done === "function") process.nextTick(done);
    return true;
  };
  process.stdout.write = writer("out");
  process.stderr.write = writer("err");
  for (const method of ["log", "info", "debug", "warn", "error", "trace"]) {
    console[method] = (...args) => emit(`${util.format(...args)}\n`, "err");
  }
  /** A partial last line (no newline yet) becomes an effect too when a reply is sent. */
  return function flushPartial() {
    for (const stream of ["out", "err"]) {
      if (pending[stream]) {
        recorder.record("stderr", { line: pending[stream] });
        pending[stream] = "";
      }
    }
  };
}
