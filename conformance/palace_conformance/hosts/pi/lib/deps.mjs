// Locates the hosts' npm dependencies inside the install directory the Python side chose.
//
// The host scripts ship inside the Python package while node_modules lives in a cache
// directory, so bare-specifier imports cannot work. Every dependency is resolved here to an
// absolute file. pi's packages declare import-only `exports`, which makes `require.resolve`
// fail with ERR_PACKAGE_PATH_NOT_EXPORTED, so entries are read from package.json directly.

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const fs = process.getBuiltinModule("node:fs");
const { createRequire } = process.getBuiltinModule("node:module");
const path = process.getBuiltinModule("node:path");
const { pathToFileURL } = process.getBuiltinModule("node:url");

// what a host has looked up, by package: the npm tree does not change while a host lives, and a
// load resolves some thirty aliases into a handful of packages
const packageDirs = new Map();
const manifests = new Map();

/** The directory of `name` as Node would find it from `fromDir` (walking up node_modules). */
export function packageDir(name, fromDir) {
  const key = `${name}\0${fromDir}`;
  let found = packageDirs.get(key);
  if (found === undefined) {
    found = findPackageDir(name, fromDir);
    packageDirs.set(key, found);
  }
  return found;
}

/** `dir/package.json`, parsed once (shared: read it, never change it). */
function manifestOf(dir) {
  let manifest = manifests.get(dir);
  if (manifest === undefined) {
    manifest = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
    manifests.set(dir, manifest);
  }
  return manifest;
}

function findPackageDir(name, fromDir) {
  let dir = path.resolve(fromDir);
  for (;;) {
    const candidate = path.join(dir, "node_modules", name);
    if (fs.existsSync(path.join(candidate, "package.json"))) return candidate;
    if (path.basename(dir) === "node_modules" && fs.existsSync(path.join(dir, name, "package.json"))) {
      return path.join(dir, name);
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`npm package ${name} is not installed (looked from ${fromDir})`);
    dir = parent;
  }
}

const IMPORT_CONDITIONS = ["import", "node", "default"];
const REQUIRE_CONDITIONS = ["require", "node", "default"];

function pickTarget(target, conditions = IMPORT_CONDITIONS) {
  if (typeof target === "string") return target;
  if (Array.isArray(target)) {
    for (const item of target) {
      const found = pickTarget(item, conditions);
      if (found) return found;
    }
    return undefined;
  }
  if (target && typeof target === "object") {
    for (const condition of conditions) {
      if (condition in target) {
        const found = pickTarget(target[condition], conditions);
        if (found) return found;
      }
    }
  }
  return undefined;
}

/** A `"./dir/*": "./dist/dir/*.js"` export pattern applied to `subpath`. */
function patternTarget(map, subpath) {
  for (const [key, value] of Object.entries(map)) {
    const star = key.indexOf("*");
    if (star < 0) continue;
    const head = key.slice(0, star);
    const tail = key.slice(star + 1);
    if (subpath.startsWith(head) && subpath.endsWith(tail) && subpath.length >= head.length + tail.length) {
      const middle = subpath.slice(head.length, subpath.length - tail.length);
      const target = pickTarget(value);
      if (target) return target.replaceAll("*", middle);
    }
  }
  return undefined;
}

/** The ESM entry file of `name` (or `name/subpath`) resolved from `fromDir` (with
 * `REQUIRE_CONDITIONS`: its CommonJS entry). */
export function entryFile(specifier, fromDir, conditions = IMPORT_CONDITIONS) {
  const parts = specifier.split("/");
  const nameLength = specifier.startsWith("@") ? 2 : 1;
  const name = parts.slice(0, nameLength).join("/");
  const subpath = parts.length > nameLength ? `./${parts.slice(nameLength).join("/")}` : ".";
  const dir = packageDir(name, fromDir);
  const manifest = manifestOf(dir);
  let target;
  if (manifest.exports !== undefined) {
    const exportsField = manifest.exports;
    const map = typeof exportsField === "string" || Array.isArray(exportsField) ||
      !Object.keys(exportsField).some((key) => key.startsWith("."))
      ? { ".": exportsField }
      : exportsField;
    target = pickTarget(map[subpath], conditions);
    if (target === undefined) target = patternTarget(map, subpath);
  } else if (subpath === ".") {
    target = manifest.module ?? manifest.main ?? "index.js";
  } else {
    target = subpath;
  }
  if (!target) throw new Error(`npm package ${name} does not export ${subpath}`);
  return path.join(dir, target);
}

/** The subpaths `name` exports ("." for the root), without patterns ("./x/*"), as found from
 * `fromDir`; undefined when it has no `exports` map or the map has a pattern (its entries
 * cannot be listed). */
export function exportSubpaths(name, fromDir) {
  const manifest = manifestOf(packageDir(name, fromDir));
  const exportsField = manifest.exports;
  if (exportsField === undefined || exportsField === null) return undefined;
  if (typeof exportsField === "string" || Array.isArray(exportsField) ||
    !Object.keys(exportsField).some((key) => key.startsWith("."))) return ["."];
  const keys = Object.keys(exportsField);
  if (keys.some((key) => key.includes("*"))) return undefined;
  return keys.filter((key) => key !== "./package.json");
}

/** The version of `name` installed as seen from `fromDir` (undefined when missing). */
export function packageVersion(name, fromDir) {
  try {
    const dir = packageDir(name, fromDir);
    return manifestOf(dir).version;
  } catch {
    return undefined;
  }
}

/** `import()` of a dependency by bare specifier, resolved from `fromDir`. */
export function importDep(specifier, fromDir) {
  return import(pathToFileURL(entryFile(specifier, fromDir)).href);
}

/**
 * `require()` of a dependency's CommonJS entry, resolved from `fromDir`. For a package that
 * ships both builds of the same code (jiti): an ES module importing CommonJS has Node scan the
 * whole file for its export names first (about 190 KB for jiti, at every host start).
 */
export function requireDep(specifier, fromDir) {
  return createRequire(import.meta.url)(entryFile(specifier, fromDir, REQUIRE_CONDITIONS));
}

/** `import()` of a file inside a package (bypasses `exports`, for pi's private modules). */
export function importPackageFile(name, relative, fromDir) {
  return import(pathToFileURL(path.join(packageDir(name, fromDir), relative)).href);
}
