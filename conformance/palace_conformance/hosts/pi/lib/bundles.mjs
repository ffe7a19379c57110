// One-file bundles of the fixed npm packages every host start loads (built once by
// `bundle.mjs` at `hosts install`), used in place of the packages' own many-file builds.
//
// Why: Node resolves, reads and links every ES module file on its own, about 0.6 ms of CPU
// each; typebox 1.3.27 (which pi-ai's argument validation and nearly every pi extension import)
// is 370 files, so it alone cost a host start about 250 ms of its 600. Bundled with esbuild
// (every `exports` entry of the package in one build, internals shared through split chunks)
// it loads in about 20 ms.
//
// How: a resolve hook (`module.registerHooks`) maps the file an import of the package resolves
// to, one of its `exports` entries, onto that entry's bundle. Every importer, the host, pi's
// packages and the bridge alike, resolves the same way, so the process holds one copy of the
// package as before. Nothing else changes: the bridge itself and everything it brings is loaded
// from its own files. The manifest names the package version each bundle was built from; a
// bundle whose package is not that version any more (or a Node without `registerHooks`) is
// simply not used.

import { packageVersion } from "./deps.mjs";

// Node's modules without an ES-module facade, whose making runs every lazy export
// (docs/typescript-hosts.md, "Node's own modules")
const fs = process.getBuiltinModule("node:fs");
const module = process.getBuiltinModule("node:module");
const path = process.getBuiltinModule("node:path");

/** Bumped whenever the bundles' layout or build options change: older bundles are rebuilt. */
export const BUNDLE_FORMAT = 1;
/** The packages bundled: loaded at (nearly) every host start, many files each, installed at the
 * top of node_modules with no nested node_modules of their own (their dependencies stay
 * imports, which resolve from the bundle to the same top-level copies). typebox (370 files) for
 * pi-ai's validation and the bridges' schemas, pi-schema (41) behind the validation, pi-mcp
 * (14) for bridges built on pi's MCP client and the pi-mcp host. */
export const BUNDLED_PACKAGES = ["typebox", "@earendil-works/pi-schema", "@earendil-works/pi-mcp"];

/** Where the bundles of the install in `nodeModules` live (npm ci wipes them with it). */
export function bundlesDir(nodeModules) {
  return path.join(nodeModules, ".cache", "palace-bundles");
}

/** The manifest written by `bundle.mjs`, or undefined when missing, unreadable or outdated. */
export function readManifest(nodeModules) {
  try {
    const manifest = JSON.parse(fs.readFileSync(path.join(bundlesDir(nodeModules), "manifest.json"), "utf8"));
    return manifest?.format === BUNDLE_FORMAT && manifest.packages && typeof manifest.packages === "object"
      ? manifest : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Route imports of the bundled packages to their bundles, from now on. Returns the names of
 * the packages routed (empty when there is nothing usable: the host then loads them as files).
 */
export function useBundles(nodeModules) {
  if (typeof module.registerHooks !== "function") return [];
  const manifest = readManifest(nodeModules);
  if (manifest === undefined) return [];
  const redirect = new Map();
  const used = [];
  for (const [name, built] of Object.entries(manifest.packages)) {
    if (!built?.entries || packageVersion(name, nodeModules) !== built.version) continue;
    const entries = Object.entries(built.entries);
    if (!entries.every(([, to]) => fs.existsSync(new URL(to)))) continue;
    for (const [from, to] of entries) redirect.set(from, to);
    used.push(name);
  }
  if (redirect.size === 0) return [];
  module.registerHooks({
    resolve(specifier, context, nextResolve) {
      const resolved = nextResolve(specifier, context);
      const bundle = redirect.get(resolved.url);
      return bundle === undefined ? resolved : { ...resolved, url: bundle, format: "module" };
    },
  });
  return used;
}
