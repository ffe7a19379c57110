#!/usr/bin/env node
// Builds the bundles lib/bundles.mjs routes imports to: for each package of BUNDLED_PACKAGES,
// every entry of its `exports` map in one esbuild build (ESM, split chunks, so the entries
// share one copy of the package's internals, names kept), written to
// `<node_modules>/.cache/palace-bundles/<package>/` with a manifest mapping the file Node
// resolves each entry to onto its bundle. Run once by `palace-conformance hosts install`.
//
//   node bundle.mjs --node-modules DIR [--packages a,b]
//
// `--packages` names other packages than BUNDLED_PACKAGES (the tests bundle one of their own).
//
// Prints one JSON line ({"packages": [...], "ms": N}); a failure is one line on stderr and exit
// 1, and leaves no manifest (the hosts then load the packages from their files, as before).

import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { BUNDLE_FORMAT, BUNDLED_PACKAGES, bundlesDir } from "./lib/bundles.mjs";
import { exportSubpaths, packageDir, packageVersion } from "./lib/deps.mjs";
import { parseArgs } from "./lib/server.mjs";

const started = Date.now();
const args = parseArgs(process.argv.slice(2));
if (typeof args["node-modules"] !== "string") {
  process.stderr.write("bundle.mjs: needs --node-modules DIR (the hosts' install)\n");
  process.exit(2);
}
const nodeModules = path.resolve(args["node-modules"]);
const out = bundlesDir(nodeModules);
const staging = `${out}.tmp-${process.pid}`;

/** How Node resolves `specifier` for an `import` inside nodeModules (the hosts' view of it). */
async function resolverInside() {
  const probe = path.join(staging, "resolve-probe.mjs");
  fs.writeFileSync(probe, "export const resolve = (specifier) => import.meta.resolve(specifier);\n");
  return (await import(pathToFileURL(probe).href)).resolve;
}

async function bundlePackage(esbuild, name, resolve) {
  if (packageDir(name, nodeModules) !== path.join(nodeModules, name)) {
    throw new Error(`${name} is not installed at the top of ${nodeModules}`);
  }
  if (fs.existsSync(path.join(nodeModules, name, "node_modules"))) {
    throw new Error(`${name} has a node_modules of its own (its imports would resolve elsewhere from the bundle)`);
  }
  const subpaths = exportSubpaths(name, nodeModules);
  if (subpaths === undefined) throw new Error(`${name} has no listable exports map`);
  const entryPoints = [];
  for (const subpath of subpaths) {
    const from = resolve(subpath === "." ? name : `${name}${subpath.slice(1)}`);
    if (!from.startsWith("file:") || !/\.m?js$/.test(from)) continue; // JSON, types, ...
    entryPoints.push({ in: new URL(from).pathname, out: subpath === "." ? "index" : subpath.slice(2).replaceAll("/", "__"), from });
  }
  if (entryPoints.length === 0) throw new Error(`${name} exports no JavaScript entry`);
  const outdir = path.join(staging, name);
  await esbuild.build({
    entryPoints: entryPoints.map(({ in: file, out: key }) => ({ in: file, out: key })),
    bundle: true, splitting: true, format: "esm", platform: "node", target: "esnext",
    packages: "external", keepNames: true, outdir, outExtension: { ".js": ".mjs" },
    chunkNames: "chunks/[name]-[hash]", logLevel: "silent", write: true,
  });
  const entries = {};
  for (const { out: key, from } of entryPoints) {
    const bundle = path.join(outdir, `${key}.mjs`);
    // the same names exported, or the bundle is wrong
    const want = Object.keys(await import(from)).sort().join(",");
    const got = Object.keys(await import(pathToFileURL(bundle).href)).sort().join(",");
    if (want !== got) throw new Error(`${name}: the bundle of ${key} exports other names than the package`);
    entries[from] = pathToFileURL(path.join(out, name, `${key}.mjs`)).href;
  }
  return { version: packageVersion(name, nodeModules), entries };
}

let esbuild;
try {
  esbuild = createRequire(import.meta.url)(packageDir("esbuild", nodeModules));
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging, { recursive: true });
  const resolve = await resolverInside();
  const packages = {};
  const names = typeof args.packages === "string" ? args.packages.split(",").filter(Boolean) : BUNDLED_PACKAGES;
  for (const name of names) packages[name] = await bundlePackage(esbuild, name, resolve);
  fs.rmSync(path.join(staging, "resolve-probe.mjs"));
  fs.writeFileSync(path.join(staging, "manifest.json"), `${JSON.stringify({ format: BUNDLE_FORMAT,
    esbuild: esbuild.version, packages }, null, 2)}\n`);
  fs.rmSync(out, { recursive: true, force: true });
  fs.renameSync(staging, out);
  process.stdout.write(`${JSON.stringify({ packages: Object.keys(packages), ms: Date.now() - started })}\n`);
  process.exitCode = 0;
} catch (error) {
  fs.rmSync(staging, { recursive: true, force: true });
  process.stderr.write(`bundle.mjs: ${String(error?.message ?? error).split("\n")[0]}\n`);
  process.exitCode = 1;
} finally {
  // esbuild's JS API keeps a service process (and so this one) alive until stopped
  await esbuild?.stop();
}
