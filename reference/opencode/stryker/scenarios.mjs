// StrykerJS's command (commandRunner.command): judge the active mutant by the catalogue.
//
// Runs in Stryker's sandbox (the cwd: a copy of reference/opencode with the mutants compiled in). The
// mutated file is the one whose instrumented text holds the active mutant's id; its behaviours
// (stryker/areas.json) select the scenarios (`palace-conformance run --covers ...`), run at seed
// level on both transports against opencode-plugin:<sandbox>/mempalace.ts, stopping at the first
// failure. In the dry run (no mutant active) it runs the union over every instrumented file, so
// the baseline is green and its time sets Stryker's timeouts. Exit 0: survived; else killed.
// PALACE_MUTATION_JOBS (default 2) is the run's --jobs; palace-conformance is found on PATH.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const OUTPUT_CAP = 200_000; // Stryker's exec stops a command past 1 MiB of output: keep the tail
const sandbox = process.cwd();
const here = path.dirname(new URL(import.meta.url).pathname);
const areas = JSON.parse(fs.readFileSync(path.join(here, "areas.json"), "utf8"));
const active = process.env.__STRYKER_ACTIVE_MUTANT__;

function instrumented(file) {
  const text = fs.readFileSync(path.join(sandbox, file), "utf8");
  if (active) return text.includes(`stryMutAct_9fa48("${active}")`);
  return text.includes("stryMutAct_9fa48(");
}

const files = Object.keys(areas.files).filter(instrumented);
if (files.length === 0) {
  console.error(active ? `mutant ${active}: in no file stryker/areas.json maps; add the file there`
    : "no instrumented file found in the sandbox: is `mutate` naming files of stryker/areas.json?");
  process.exit(2);
}
const covers = [...new Set(files.flatMap((file) => areas.files[file]))];
const argv = ["run", "--bridge", `opencode-plugin:${path.join(sandbox, "mempalace.ts")}`,
  "--level", "seed", "--transport", "both", "--jobs", process.env.PALACE_MUTATION_JOBS ?? "2",
  "-x", "-q", ...covers.flatMap((id) => ["--covers", id])];
console.log(`mutant ${active ?? "(dry run)"} in ${files.join(", ")}: palace-conformance ${argv.join(" ")}`);

const activate = pathToFileURL(path.join(here, "activate.mjs")).href;
const nodeOptions = [process.env.NODE_OPTIONS, `--import=${activate}`].filter(Boolean).join(" ");
const child = spawn("palace-conformance", argv, {
  cwd: path.resolve(here, "..", "..", ".."), // the repo root, where the catalogue lives
  env: { ...process.env, NODE_OPTIONS: nodeOptions },
  stdio: ["ignore", "pipe", "pipe"],
});
let tail = "";
const keep = (chunk) => { tail = (tail + chunk).slice(-OUTPUT_CAP); };
child.stdout.setEncoding("utf8").on("data", keep);
child.stderr.setEncoding("utf8").on("data", keep);
child.on("error", (error) => {
  console.error(`cannot start palace-conformance (${error.message}): put the kit's venv on PATH`);
  process.exit(2);
});
child.on("close", (code, signal) => {
  process.stdout.write(tail);
  process.exit(code ?? (signal ? 1 : 1));
});
