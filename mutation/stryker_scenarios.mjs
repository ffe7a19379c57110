// StrykerJS's command (commandRunner.command) for both TypeScript copies: judge the active mutant by
// the catalogue.
//
//   node ../../../../mutation/stryker_scenarios.mjs pi-extension|opencode-plugin
//
// Runs in Stryker's sandbox (the cwd: reference/<copy>/.stryker-tmp/sandbox-*, a copy of the copy
// with the mutants compiled in; the path above climbs from there to the repository root). The
// copy's own stryker/ folder (in the sandbox) holds areas.json and activate.mjs. The shared seed
// policy (reference/seed-policy) is mirrored into the copy's seed-policy/ by python -m
// mutation.stryker, so Stryker mutates it there; the copy imports it as ../seed-policy (from
// mempalace.ts) or ../../seed-policy (from src/), which in the sandbox is .stryker-tmp/seed-policy:
// that name is linked to the sandbox's own (mutated) mirror before anything runs.
// The mutated file is the one whose instrumented text holds the active mutant's id; its behaviours
// (stryker/areas.json) select the scenarios (`palace-conformance run --covers ...`), run at seed
// level on both transports against <kind>:<sandbox>/mempalace.ts, stopping at the first
// failure. In the dry run (no mutant active) it runs the union over every instrumented file, so
// the baseline is green and its time sets Stryker's timeouts. Exit 0: survived; else killed.
// PALACE_MUTATION_JOBS (default 2) is the run's --jobs; palace-conformance is found on PATH.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const OUTPUT_CAP = 200_000; // Stryker's exec stops a command past 1 MiB of output: keep the tail
const KINDS = ["pi-extension", "opencode-plugin"];
const kind = process.argv[2];
if (!KINDS.includes(kind)) {
  console.error(`usage: node stryker_scenarios.mjs ${KINDS.join("|")} (the copy's host kind); got ${kind ?? "nothing"}`);
  process.exit(2);
}
const sandbox = process.cwd();
const here = path.join(sandbox, "stryker"); // the copy's own stryker/ files, as the sandbox has them
linkSharedPolicy();
const areas = JSON.parse(fs.readFileSync(path.join(here, "areas.json"), "utf8"));
const active = process.env.__STRYKER_ACTIVE_MUTANT__;

// A drawn sample (python -m mutation.stryker --draw N) names its state directory in
// PALACE_STRYKER_STATE: draw.json (the drawn mutants' keys), plan.json (Stryker's id -> key, written
// by the palace-journal reporter) and journal.jsonl (verdicts so far). A mutant outside the draw (Stryker made it because it shares a drawn one's
// range) exits 0 at once and is not counted; a drawn one killed in an earlier run of the draw is
// replayed (exit 1) rather than run again, so an interrupted draw resumes; a survivor runs again
// (the catalogue may have grown a check since). A dry run is skipped when baseline.json holds a
// passing run of the same scenarios under the same PALACE_STRYKER_DIGEST (copy, catalogue, kit).
const state = process.env.PALACE_STRYKER_STATE;
const readJson = (name, fallback) => {
  try { return JSON.parse(fs.readFileSync(path.join(state, name), "utf8")); } catch { return fallback; }
};
function gateMutant() {
  const key = readJson("plan.json", {})[active];
  const drawn = new Set(readJson("draw.json", { mutants: [] }).mutants.map((m) => m.key));
  if (key === undefined || !drawn.has(key)) {
    console.log(`mutant ${active}: not drawn (${key ?? "not in plan.json"})`);
    process.exit(0);
  }
  let earlier;
  try {
    for (const line of fs.readFileSync(path.join(state, "journal.jsonl"), "utf8").split("\n")) {
      if (line.trim()) { const record = JSON.parse(line); if (record.key === key) earlier = record; }
    }
  } catch { /* no journal yet */ }
  if (earlier && (earlier.status === "Killed" || earlier.status === "Timeout")) {
    console.log(`palace-journal: replayed ${earlier.status} of ${key} from ${earlier.at}`);
    process.exit(1);
  }
}
function gateDryRun() {
  // A draw skips Stryker's baseline (the union of every drawn file's scenarios, the whole catalogue
  // on a loaded machine for a quarter of an hour): each kill is checked against the unmutated copy
  // instead, on the scenario that killed it (below), which is the baseline that kill needs.
  console.log("dry run: skipped in a draw; every kill is checked on the unmutated copy");
  process.exit(0);
}

/** .stryker-tmp/seed-policy (where the copy's imports of the shared policy land in the sandbox)
 * linked to this sandbox's mirror of it, mutated or not; without a mirror, to reference/seed-policy. */
function linkSharedPolicy() {
  const link = path.resolve(sandbox, "..", "seed-policy");
  const mirror = path.join(sandbox, "seed-policy");
  const target = fs.existsSync(mirror) ? path.relative(path.dirname(link), mirror)
    : path.relative(path.dirname(link), path.resolve(sandbox, "..", "..", "..", "seed-policy"));
  let current;
  try { current = fs.readlinkSync(link); } catch { current = undefined; }
  if (current === target) return;
  if (current !== undefined) fs.unlinkSync(link);
  fs.symlinkSync(target, link, "dir");
}

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
if (state && active) gateMutant();
if (state && !active) gateDryRun();
// A failure is believed only when it repeats: the run's failed results run again on their own
// (--last-failed, twice for a mutant); where they pass, the failure was the machine (a timing
// window a loaded host overran), not the mutant, and the whole selection runs once more (ATTEMPTS
// runs in all; a mutant whose every failure failed to repeat survives, to be triaged by hand). So
// a flaky check neither kills a mutant nor fails the dry run (which runs without -x).
const ATTEMPTS = 2;
const reports = fs.mkdtempSync(path.join(os.tmpdir(), "palace-stryker-"));
// The copy's capabilities, as observation finds them unmutated (all nine), claimed: a loaded
// machine's observation (25 s a run, and it times out past 15 s loads) could otherwise judge the
// run with no bridge feature, every feature scenario not applicable, and a mutant that hides a
// feature from the observation must fail that feature's scenarios, not skip them. A load under
// load takes longer than the 15 s default op deadline, hence --op-timeout-ms.
const CAPABILITIES = "stdio,http,wakeup,feeding,diary_command,provenance,mailbox,session_preamble,keepalive";
const argv = ["run", "--bridge", `${kind}:${path.join(sandbox, "mempalace.ts")}?capabilities=${CAPABILITIES}`,
  "--level", "seed", "--transport", "both", "--jobs", process.env.PALACE_MUTATION_JOBS ?? "2",
  "--op-timeout-ms", "60000", "-q", "--report-dir", reports, ...covers.flatMap((id) => ["--covers", id])];
// A draw widens every timing window's slack (PALACE_MUTATION_SLACK_FACTOR, set by
// python -m mutation.stryker --draw): on a machine at load 50 an unmutated retry step overruns
// 250 + 250 ms, so three such overruns in a row with a mutant that cannot touch timing "killed" it.
const slack = process.env.PALACE_MUTATION_SLACK_FACTOR ?? undefined;
if (slack) argv.push("--slack-factor", slack);
// Scenarios a draw has set aside (they failed on the unmutated copy: unusable.json) are left out of
// its later mutants' selections by name (--select every other covering scenario), so a mutant
// pays for them neither a stop at -x nor the unmutated tries again.
const setAside = state && active ? readJson("unusable.json", []) : [];
if (setAside.length) {
  const listed = spawnSync("palace-conformance", [...argv, "--list"], { encoding: "utf8" });
  const ids = (listed.stdout ?? "").split("\n").map((line) => line.split(/\s+/)[0])
    .filter((id) => /^[a-z]+\.[\w.-]+$/.test(id) && !setAside.includes(id));
  if (ids.length === 0) {
    console.log(`mutant ${active}: every covering scenario is set aside (${setAside.join(", ")})`);
    fs.appendFileSync(path.join(state, "unmutated-failures.jsonl"), `${JSON.stringify({
      key: readJson("plan.json", {})[active], at: new Date().toISOString(), results: setAside })}\n`);
    process.exit(0);
  }
  argv.push(...ids.flatMap((id) => ["--select", id]));
}
console.log(`mutant ${active ?? "(dry run)"} in ${files.join(", ")}: palace-conformance ${argv.join(" ")}`);

const activate = pathToFileURL(path.join(here, "activate.mjs")).href;
const nodeOptions = [process.env.NODE_OPTIONS, `--import=${activate}`].filter(Boolean).join(" ");
let tail = "";
const keep = (chunk) => { tail = (tail + chunk).slice(-OUTPUT_CAP); };

function conformance(args, mutated = true) {
  const env = { ...process.env, NODE_OPTIONS: nodeOptions };
  if (!mutated) delete env.__STRYKER_ACTIVE_MUTANT__;
  return new Promise((resolve) => {
    const child = spawn("palace-conformance", args, {
      cwd: path.resolve(sandbox, "..", ".."), // the copy's folder (the sandbox's parent's parent)
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.setEncoding("utf8").on("data", keep);
    child.stderr.setEncoding("utf8").on("data", keep);
    child.on("error", (error) => {
      console.error(`cannot start palace-conformance (${error.message}): put the kit's venv on PATH`);
      process.exit(2);
    });
    child.on("close", (code) => resolve(code ?? 1));
  });
}

// A kill in a draw (which has no dry run) stands when the failed results pass on the unmutated
// copy: once in UNMUTATED_TRIES runs (a loaded machine overruns a timing window unmutated too).
const UNMUTATED_TRIES = 3;
async function passesUnmutated() {
  for (let i = 1; i <= UNMUTATED_TRIES; i += 1) {
    if (await conformance([...argv, "--last-failed"], false) === 0) return true;
    keep(`\n[unmutated try ${i}: failed too]\n`);
  }
  return false;
}

// A mutant's failure repeats when its failed results fail again in each of CONFIRMATIONS runs on
// their own; the dry run's failures need to fail again once.
const CONFIRMATIONS = 2;
async function repeats() {
  for (let i = 1; i <= (active ? CONFIRMATIONS : 1); i += 1) {
    if (await conformance([...argv, "--last-failed"]) === 0) return false;
  }
  return true;
}

// In a draw, a result that fails on the unmutated copy too (a load-sensitive scenario on a loaded
// machine) cannot judge: it is set aside (`unusable`), the selection runs again without -x and the
// other failures are judged as above; a mutant that fails only unusable results is recorded in
// unmutated-failures.jsonl, so the draw counts it not judged rather than killed or survived.
const RECORD = path.join(reports, "last-failed.json");
const failedNow = () => { try { return JSON.parse(fs.readFileSync(RECORD, "utf8")).failed ?? []; } catch { return []; } };
const resultKey = (r) => `${r.scenario}@${r.transport}`;
function keepOnly(results) {
  const record = JSON.parse(fs.readFileSync(RECORD, "utf8"));
  fs.writeFileSync(RECORD, JSON.stringify({ ...record, failed: results }));
}
const unusable = new Set();
function noteUnusable() {
  keep(`\n[fails unmutated too, set aside: ${[...unusable].join(", ")}]\n`);
  const ids = new Set([...readJson("unusable.json", []), ...[...unusable].map((k) => k.split("@")[0])]);
  fs.writeFileSync(path.join(state, "unusable.json"), JSON.stringify([...ids].sort()));
  fs.appendFileSync(path.join(state, "unmutated-failures.jsonl"), `${JSON.stringify({
    key: readJson("plan.json", {})[active], at: new Date().toISOString(), results: [...unusable] })}\n`);
}

async function judgeMutant() {
  for (let attempt = 1; attempt <= ATTEMPTS; attempt += 1) {
    // the first run stops at its first failure; after a failure that did not repeat, or one set
    // aside, the second runs the whole selection, so every other result judges once
    if (await conformance(attempt > 1 ? argv : [...argv, "-x"]) === 0) return 0;
    const failed = failedNow().filter((r) => !unusable.has(resultKey(r)));
    if (failed.length === 0) { noteUnusable(); return 0; }
    keepOnly(failed);
    keep(`\n[attempt ${attempt}: failed; its failures run again on their own]\n`);
    if (!(await repeats())) { keep(`\n[attempt ${attempt}: they passed again: the machine]\n`); continue; }
    if (!state) return 1; // CI's sample: its dry run was the baseline
    const confirmed = failedNow();
    if (await passesUnmutated()) return 1;
    for (const r of failedNow()) unusable.add(resultKey(r));
    fs.writeFileSync(path.join(state, "unusable.json"), JSON.stringify([...new Set([
      ...readJson("unusable.json", []), ...[...unusable].map((k) => k.split("@")[0])])].sort()));
    if (confirmed.some((r) => !unusable.has(resultKey(r)))) return 1; // passed unmutated at last try
  }
  if (unusable.size) noteUnusable();
  return 0; // every failure failed to repeat: survives, to be triaged by hand
}

async function judgeDryRun() {
  if (await conformance(argv) === 0) return 0;
  keep("\n[dry run failed; its failures run again on their own]\n");
  return (await repeats()) ? 1 : 0;
}

const code = active ? await judgeMutant() : await judgeDryRun();
fs.rmSync(reports, { recursive: true, force: true });
process.stdout.write(tail);
if (state && active) { // what the catalogue said, for triage: a survivor's output Stryker keeps not
  fs.appendFileSync(path.join(state, "outputs.jsonl"), `${JSON.stringify({
    key: readJson("plan.json", {})[active], code, at: new Date().toISOString(), output: tail.slice(-3000) })}\n`);
}
process.exit(code);
