// V8's code cache for the modules jiti evaluates, kept beside jiti's transpile cache.
//
// jiti runs each module it loads through `vm.runInThisContext`, and `moduleCache: false` (pi's
// setting) makes every load compile the bridge's modules from their text again: Node's own
// compile cache (NODE_COMPILE_CACHE) covers only what Node's loaders compile. Here the hosts
// give those scripts V8's cached data instead, made once after a first load and checked by V8
// against the code, V8's version and its flags before use (a mismatch is rejected and compiled
// as before). What runs is the same code with the same file names and lines: only the compiling
// is skipped. Scripts that are not jiti's module wrappers (a bridge's own `vm` use) are left
// alone.

const crypto = process.getBuiltinModule("node:crypto");
const fs = process.getBuiltinModule("node:fs");
const path = process.getBuiltinModule("node:path");
const vm = process.getBuiltinModule("node:vm");

/** The wrapper jiti 2 puts around a module's code (`eval_evalModule`). */
const JITI_WRAPPER = "function (exports, require, module, __filename, __dirname, jitiImport, jitiESMResolve) {";

/** Files the cache may hold (a few KB each): past it nothing more is kept, and the scripts not
 * kept compile as they would without a cache. */
export const MAX_CACHE_FILES = 4096;

let cacheDir;
const fresh = new Map(); // cache file -> a script compiled without usable cached data

/** Serve jiti's module scripts from V8 cached data in `dir` (created on first write). */
export function useCodeCache(dir) {
  if (cacheDir !== undefined) return;
  cacheDir = dir;
  const original = vm.runInThisContext;
  vm.runInThisContext = function runInThisContext(code, options) {
    if (typeof code !== "string" || options === null || typeof options !== "object" ||
      !(code.startsWith(`(${JITI_WRAPPER}`) || code.startsWith(`(async ${JITI_WRAPPER}`))) {
      return Reflect.apply(original, this, arguments);
    }
    const digest = crypto.createHash("sha256").update(code).update("\0").update(String(options.filename))
      .digest("hex");
    const file = path.join(cacheDir, `${digest}.v8`);
    let cachedData;
    try {
      cachedData = fs.readFileSync(file);
    } catch {
      cachedData = undefined; // none yet: compiled as jiti would, and kept after the load
    }
    const script = new vm.Script(code, cachedData === undefined ? options : { ...options, cachedData });
    if (cachedData === undefined || script.cachedDataRejected) fresh.set(file, script);
    return script.runInThisContext(options);
  };
}

/**
 * Keep the cached data of the scripts compiled afresh since the last call, while the cache has
 * room (`MAX_CACHE_FILES`). Called once a load has run the bridge's factory, so the functions it
 * ran are compiled into the data too. Each file is written whole under a temporary name and
 * renamed: hosts running side by side never read half a file. A failure only costs the next
 * host its compile.
 */
export function keepCodeCache() {
  if (cacheDir === undefined || fresh.size === 0) return;
  let room;
  try {
    fs.mkdirSync(cacheDir, { recursive: true });
    room = MAX_CACHE_FILES - fs.readdirSync(cacheDir).length;
  } catch {
    room = 0;
  }
  for (const [file, script] of fresh) {
    if (room-- <= 0) break;
    const partial = `${file}.${process.pid}.tmp`;
    try {
      fs.writeFileSync(partial, script.createCachedData());
      fs.renameSync(partial, file);
    } catch {
      try {
        fs.rmSync(partial, { force: true });
      } catch {
        // nothing more to do: the next host compiles this script again
      }
    }
  }
  fresh.clear();
}
