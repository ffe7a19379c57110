// The judge's matchers, checks and scenario expectations, written from fixtures/README.md alone
// (sections Matchers, Checks, Scenario expectations, How a step is judged), then held to the
// cases in fixtures/runner-tests/. If this disagrees with the Python judge, the README is not
// enough to implement the judge: fix the README, not this file.
//
// Usage: node tests/ts/judge_from_docs.mjs [RUNNER_TESTS_DIR]
// Prints one line per failing case on stderr and "N passed, M failed" on stdout; exits 1 on any
// failure. Plain ES modules, no dependencies, Node 20+.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const DIR = process.argv[2] ?? join(HERE, "..", "..", "fixtures", "runner-tests");
/** The files whose cases this script judges (steps.json and parity.json need a whole runner). */
const FILES = ["matchers.json", "checks.json", "expectations.json"];

// --- JSON values ---------------------------------------------------------------------------

/** What a matcher is applied to when the key it is under is absent. */
const NOTHING = Symbol("nothing");

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const isNumber = (v) => typeof v === "number";
const has = (obj, key) => Object.prototype.hasOwnProperty.call(obj, key);

/** Deep equality as `$eq` means it: numbers by value, a boolean never a number. */
function sameJson(a, b) {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length
      && a.every((item, i) => sameJson(item, b[i]));
  }
  if (isObject(a) || isObject(b)) {
    if (!isObject(a) || !isObject(b)) return false;
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length
      && keys.every((k) => has(b, k) && sameJson(a[k], b[k]));
  }
  return a === b; // strings, numbers (1 === 1.0), booleans, null: JS types never cross here
}

// --- matchers ------------------------------------------------------------------------------

const OPERATORS = new Set(["$eq", "$regex", "$contains", "$exists", "$in", "$keys", "$gte", "$gt", "$lte",
  "$lt", "$not", "$all", "$any"]);

function isOperatorObject(m) {
  const keys = isObject(m) ? Object.keys(m) : [];
  return keys.length > 0 && keys.every((k) => k.startsWith("$"));
}

/** Whether `value` (a JSON value, or NOTHING) is matched by `matcher`. */
function match(matcher, value) {
  if (isOperatorObject(matcher)) {
    return Object.entries(matcher).every(([op, arg]) => holds(op, arg, value));
  }
  if (value === NOTHING) return false;
  if (isObject(matcher)) {
    return isObject(value) && Object.entries(matcher)
      .every(([key, sub]) => match(sub, has(value, key) ? value[key] : NOTHING));
  }
  if (Array.isArray(matcher)) {
    return Array.isArray(value) && value.length === matcher.length
      && matcher.every((sub, i) => match(sub, value[i]));
  }
  return sameJson(matcher, value);
}

function holds(op, arg, value) {
  if (!OPERATORS.has(op)) throw new Error(`unknown matcher operator ${op}`);
  switch (op) {
    case "$exists": return (value !== NOTHING) === arg;
    case "$not": return !match(arg, value);
    case "$all": return arg.every((m) => match(m, value));
    case "$any": return arg.some((m) => match(m, value));
  }
  if (value === NOTHING) return false;
  switch (op) {
    case "$eq": return sameJson(arg, value);
    case "$in": return arg.some((candidate) => sameJson(candidate, value));
    case "$keys": return isObject(value) && Object.keys(value).every((key) => arg.includes(key));
    case "$regex": return typeof value === "string" && new RegExp(arg).test(value);
    case "$contains":
      if (typeof value === "string") return typeof arg === "string" && value.includes(arg);
      return Array.isArray(value) && value.some((item) => match(arg, item));
    case "$gte": return isNumber(value) && value >= arg;
    case "$gt": return isNumber(value) && value > arg;
    case "$lte": return isNumber(value) && value <= arg;
    case "$lt": return isNumber(value) && value < arg;
  }
  throw new Error(`unhandled operator ${op}`);
}

// --- pointers, bounds, timing ----------------------------------------------------------------

/** The value at an RFC 6901 pointer, or NOTHING. */
function resolve(doc, pointer) {
  if (pointer === "") return doc;
  let here = doc;
  for (const raw of pointer.split("/").slice(1)) {
    const token = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    if (isObject(here) && has(here, token)) here = here[token];
    else if (Array.isArray(here) && /^(0|[1-9][0-9]*)$/.test(token) && Number(token) < here.length) {
      here = here[Number(token)];
    } else return NOTHING;
  }
  return here;
}

/** A count spec: an integer, or {equals} / {at_least, at_most}; from a check, its own fields. */
function withinBounds(spec, n) {
  if (typeof spec === "number") return n === spec;
  if (spec.equals !== undefined) return n === spec.equals;
  return n >= (spec.at_least ?? 0) && (spec.at_most === undefined || n <= spec.at_most);
}

function withinTiming(timing, ms) {
  return ms >= timing.at_least
    && (timing.slack_ms === undefined || ms <= timing.at_least + timing.slack_ms);
}

// --- checks --------------------------------------------------------------------------------

const matching = (records, matcher) =>
  records.flatMap((record, i) => (match(matcher, record) ? [i] : []));

/** Whether a check passes over a stream of records. */
function passes(check, records) {
  switch (check.check) {
    case "sequence": {
      let next = 0;
      for (const item of check.items) {
        while (next < records.length && !match(item, records[next])) next += 1;
        if (next === records.length) return false;
        next += 1;
      }
      return true;
    }
    case "count": return withinBounds(check, matching(records, check.match).length);
    case "absent": return matching(records, check.match).length === 0;
    case "order": {
      const firsts = matching(records, check.first);
      const thens = matching(records, check.then);
      if ((check.then_required ?? true) && thens.length === 0) return false;
      if (thens.length === 0) return true;
      if (firsts.length === 0) return false;
      const anchor = check.after === "last" ? firsts[firsts.length - 1] : firsts[0];
      return thens.every((i) => i > anchor);
    }
    case "distinct": {
      const values = [];
      for (const i of matching(records, check.match)) {
        const value = resolve(records[i], check.field);
        if (value !== NOTHING && !values.some((seen) => sameJson(seen, value))) values.push(value);
      }
      return withinBounds(check, values.length);
    }
    case "gap": {
      const starts = matching(records, check.from);
      const nth = check.from_nth ?? 1;
      if (starts.length < nth) return false;
      const start = starts[nth - 1];
      const end = records.findIndex((r, i) => i > start && match(check.to, r));
      if (end < 0) return false;
      const [t0, t1] = [records[start].t, records[end].t];
      if (!isNumber(t0) || !isNumber(t1)) return false;
      const created = records[end].created_t;
      const t = isNumber(created) && created < t1 ? created : t1;
      return withinTiming(check.ms, (t - t0) * 1000);
    }
  }
  throw new Error(`unknown check ${check.check}`);
}

// --- scenario expectations -----------------------------------------------------------------

/** {field: "pass"|"fail"} for a tools expectation over registered tools {name, parameters}. */
function judgeTools(expect, tools, catalogue) {
  const names = tools.map((t) => t.name);
  const reference = catalogue.map((t) => t.name);
  const out = {};
  if (expect.registered !== undefined) {
    if (expect.registered === "none") out.registered = names.length === 0;
    else {
      const wanted = expect.registered === "catalogue" ? reference : expect.registered;
      out.registered = names.length === new Set(names).size
        && names.length === wanted.length && wanted.every((n) => names.includes(n));
    }
  }
  if (expect.includes?.length) out.includes = expect.includes.every((n) => names.includes(n));
  if (expect.excludes?.length) out.excludes = !expect.excludes.some((n) => names.includes(n));
  if (expect.schemas === "catalogue") {
    out.schemas = tools.every((tool) => {
      const entry = catalogue.find((c) => c.name === tool.name);
      const schema = has(tool, "parameters") ? tool.parameters : tool.inputSchema;
      return entry !== undefined && sameJson(schema, entry.inputSchema);
    });
  }
  if (expect.order === "catalogue") {
    const seen = names.filter((n) => reference.includes(n));
    const inOrder = reference.filter((n) => names.includes(n));
    out.order = sameJson(seen, inOrder);
  }
  return Object.fromEntries(Object.entries(out).map(([k, ok]) => [k, ok ? "pass" : "fail"]));
}

/** What the journal and a liveness probe say about the stdio children. */
function processFacts(journal, isAlive) {
  const children = journal
    .filter((r) => r.kind === "process_start" && r.transport === "stdio").map((r) => r.pid);
  const exited = new Set(journal.filter((r) => r.kind === "process_exit").map((r) => r.pid));
  const signals = {};
  for (const r of journal) {
    if (r.kind === "signal" && children.includes(r.pid)) {
      signals[r.signal] = (signals[r.signal] ?? 0) + 1;
    }
  }
  const living = children.filter((pid) => isAlive(pid));
  const killed = children.filter((pid) => !exited.has(pid) && !living.includes(pid)).length;
  if (killed > 0) signals.SIGKILL = (signals.SIGKILL ?? 0) + killed;
  // grandchildren the children started, under their own pid: never a spawn, alive an orphan,
  // unless they left the child's process group (left_group: true), out of any bridge's reach
  const descendants = new Set(journal
    .filter((r) => r.kind === "descendant_start" && Number.isInteger(r.pid) && !children.includes(r.pid)
      && r.left_group !== true)
    .map((r) => r.pid));
  const orphans = [...descendants].filter((pid) => isAlive(pid)).length;
  return { spawned: children.length, signals, alive: living.length + orphans };
}

function judgeProcesses(expect, facts) {
  const out = {};
  if (expect.spawned !== undefined) out.spawned = withinBounds(expect.spawned, facts.spawned);
  for (const [name, spec] of Object.entries(expect.signals ?? {})) {
    out[`signals/${name}`] = withinBounds(spec, facts.signals[name] ?? 0);
  }
  if (expect.alive_after_shutdown !== undefined) {
    out.alive_after_shutdown = facts.alive === expect.alive_after_shutdown;
  }
  return Object.fromEntries(Object.entries(out).map(([k, ok]) => [k, ok ? "pass" : "fail"]));
}

/** {index: verdict} for wire_secrets over what a run left behind. */
function judgeSecrets(secrets, { journal, steps, host_stderr, host_argv }) {
  const texts = [
    journal.map((r) => JSON.stringify(r) + "\n").join(""),
    JSON.stringify(steps.flatMap((s) => s.effects ?? [])),
    JSON.stringify(steps.map((s) => ({ result: s.result ?? null, error: s.error ?? null }))),
    host_stderr,
    JSON.stringify(journal.filter((r) => has(r, "argv")).map((r) => r.argv)),
    JSON.stringify(host_argv),
  ];
  return Object.fromEntries(secrets.map((secret, i) =>
    [String(i), texts.some((text) => text.includes(secret)) ? "fail" : "pass"]));
}

// --- running the cases ---------------------------------------------------------------------

function outcome(group, test) {
  const data = test.data;
  if (has(group, "matcher")) return [match(group.matcher, data), test.valid];
  if (has(group, "check")) return [passes(group.check, data), test.valid];
  if (has(group, "pointer")) {
    const value = resolve(data, group.pointer);
    return test.found ? [value !== NOTHING && sameJson(value, test.expected), true]
      : [value === NOTHING, true];
  }
  if (has(group, "tools")) return [judgeTools(group.tools, data, group.catalogue), test.expected];
  if (has(group, "processes")) {
    const alive = new Set(data.alive);
    const facts = processFacts(data.journal, (pid) => alive.has(pid));
    return [{ facts, verdicts: judgeProcesses(group.processes, facts) },
      { facts: test.facts, verdicts: test.expected }];
  }
  if (has(group, "wire_secrets")) return [judgeSecrets(group.wire_secrets, data), test.expected];
  throw new Error(`no judge here for a group of kind ${Object.keys(group).join(", ")}`);
}

function main() {
  let passed = 0;
  let failed = 0;
  for (const file of FILES) {
    const groups = JSON.parse(readFileSync(join(DIR, file), "utf8"));
    for (const group of groups) {
      for (const test of group.tests) {
        const name = `${file.replace(/\.json$/, "")}: ${group.description}: ${test.description}`;
        let got;
        let want;
        try {
          [got, want] = outcome(group, test);
        } catch (error) {
          [got, want] = [`error: ${error.message}`, "no error"];
        }
        if (sameJson(got, want)) passed += 1;
        else {
          failed += 1;
          console.error(`FAIL ${name}: got ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
        }
      }
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}

main();
