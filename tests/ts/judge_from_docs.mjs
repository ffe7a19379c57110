// The judge's matchers, checks, step and scenario expectations and parity, written from
// fixtures/README.md alone (sections Matchers, Checks, Step expectations, How a step is judged,
// Scenario expectations, Parity), then held to every case in fixtures/runner-tests/. If this
// disagrees with the Python judge, the README is not enough to implement the judge: fix the
// README, not this file.
//
// Usage: node tests/ts/judge_from_docs.mjs [RUNNER_TESTS_DIR]
// Prints one line per failing case on stderr and "N passed, M failed" on stdout; exits 1 on any
// failure. Plain ES modules, no dependencies, Node 20+.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const DIR = process.argv[2] ?? join(HERE, "..", "..", "fixtures", "runner-tests");
/** The files whose cases this script judges: all five. */
const FILES = ["matchers.json", "checks.json", "expectations.json", "steps.json", "parity.json"];

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

// --- steps (How a step is judged) ------------------------------------------------------------

/** Error kinds that say the host could not do the op at all. */
const HOST_KINDS = new Set(["host_timeout", "bad_request"]);
const verdict = (ok) => (ok ? "pass" : "fail");

/** The JSON object or array a tool's text holds, or NOTHING: JSON whitespace trimmed, then it
 * must start with `{` or `[` and parse as strict JSON. */
function parseText(text) {
  const trimmed = text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, "");
  if (trimmed === "" || !"{[".includes(trimmed[0])) return NOTHING;
  try {
    return JSON.parse(trimmed);
  } catch {
    return NOTHING;
  }
}

/** What `result` matches: for call_tool the result plus `json` from its first content item. */
function resultView(op, result) {
  if (op !== "call_tool" || !isObject(result) || !Array.isArray(result.content)) return result;
  const first = result.content[0];
  if (!isObject(first) || typeof first.text !== "string") return result;
  const parsed = parseText(first.text);
  return parsed === NOTHING ? result : { ...result, json: parsed };
}

/** The first JSON object written in a text, or NOTHING. */
function firstObject(text) {
  for (let start = text.indexOf("{"); start >= 0; start = text.indexOf("{", start + 1)) {
    for (let end = text.indexOf("}", start); end >= 0; end = text.indexOf("}", end + 1)) {
      try {
        const value = JSON.parse(text.slice(start, end + 1));
        if (isObject(value)) return value;
      } catch { /* not yet a whole object */ }
    }
  }
  return NOTHING;
}

/** The error an isError tool result says: message, code, data and kind (undefined when it
 * cannot be told; the wording rules of the pi host are not ported: no case needs them). */
function errorOfResult(result) {
  const text = (result.content ?? [])
    .filter((item) => isObject(item) && typeof item.text === "string").map((i) => i.text).join("\n");
  const details = isObject(result.details) && isObject(result.details.error) ? result.details.error : {};
  let message = text;
  if (typeof details.message === "string" && !text.includes(details.message)) {
    message = text === "" ? details.message : `${text}\n${details.message}`;
  }
  const inText = text.match(/-32[0-9]{3}/);
  const error = { message };
  if (has(details, "code")) error.code = details.code;
  else if (inText) error.code = Number(inText[0]);
  if (has(details, "data")) error.data = details.data;
  else {
    const found = firstObject(text);
    if (found !== NOTHING) error.data = found;
  }
  if (typeof details.kind === "string") error.kind = details.kind;
  else if (Number.isInteger(details.code)) error.kind = "tool_error";
  else if (isNumber(details.status)) {
    const status = details.status;
    error.kind = status === 401 || status === 403 ? "auth"
      : status >= 200 && status < 300 ? "protocol" : "http_error";
  } else if (inText) error.kind = "tool_error";
  return error;
}

/** The pointers (below the step's) and verdicts of each expectation of a step. */
function judgeExpectations(step, data, transport) {
  const expect = step.expect ?? {};
  const out = {};
  const ran = data.ran !== false && (data.failure === undefined || data.failure === null);
  const say = (pointer, ok) => { out[pointer] = verdict(ran && ok); };
  const wantsError = expect.error !== undefined;
  const wantOk = expect.ok ?? (wantsError ? false : undefined);
  if (wantOk !== undefined) say("/expect/ok", data.ok === wantOk);
  let error = data.ok === false && isObject(data.error) ? data.error : null;
  if ((wantsError || wantOk === false) && step.op === "call_tool" && data.ok === true
      && isObject(data.result) && data.result.is_error === true) {
    error = errorOfResult(data.result);
  }
  if (wantsError) {
    const want = expect.error;
    if (has(want, "kind")) say("/expect/error/kind", error !== null && error.kind === want.kind);
    if (has(want, "code")) {
      say("/expect/error/code", error !== null && isNumber(error.code) && error.code === want.code);
    }
    if (has(want, "message_contains")) {
      const texts = Array.isArray(want.message_contains) ? want.message_contains : [want.message_contains];
      say("/expect/error/message_contains", error !== null && typeof error.message === "string"
        && texts.every((t) => error.message.includes(t)));
    }
    if (has(want, "data")) {
      say("/expect/error/data", error !== null && match(want.data, has(error, "data") ? error.data : null));
    }
  }
  if (has(expect, "result")) say("/expect/result", match(expect.result, resultView(step.op, data.result ?? null)));
  for (const stream of ["effects", "journal"]) {
    (expect[stream] ?? []).forEach((check, i) => {
      if (check.transport !== undefined && check.transport !== transport) return;
      say(`/expect/${stream}/${i}`, passes(check, data[stream] ?? []));
    });
  }
  if (expect.tools !== undefined) {
    const listed = step.op === "rpc" ? data.result?.result?.tools : data.tools;
    const judged = Array.isArray(listed) ? judgeTools(expect.tools, listed, []) : null;
    for (const field of ["registered", "includes", "excludes", "schemas", "order"]) {
      const named = Array.isArray(expect.tools[field]) ? expect.tools[field].length > 0
        : expect.tools[field] !== undefined;
      if (named) say(`/expect/tools/${field}`, judged !== null && judged[field] === "pass");
    }
  }
  if (expect.elapsed_ms !== undefined) {
    say("/expect/elapsed_ms", isNumber(data.elapsed_ms) && withinTiming(expect.elapsed_ms, data.elapsed_ms));
  }
  return { ran, out };
}

/** {pointer: verdict} for a scenario whose only step is `step`, run as `data` says. */
function judgeStep(step, data) {
  const transport = data.transport ?? "stdio";
  if (step.transport !== undefined && step.transport !== transport) return {};
  const { ran, out } = judgeExpectations(step, data, transport);
  const kind = isObject(data.error) ? data.error.kind : undefined;
  const hostFailed = data.ok === false && HOST_KINDS.has(kind) && step.expect?.error?.kind !== kind;
  const settleFailed = step.op === "settle" && data.ok === false;
  const implicit = { "/steps/0": verdict(ran && !hostFailed && !settleFailed) };
  return Object.assign(implicit, ...Object.entries(out).map(([p, v]) => ({ [`/steps/0${p}`]: v })));
}

// --- parity (the normalised outcome) ---------------------------------------------------------

const TIME_KEYS = new Set(["timestamp", "created_at", "updated_at", "filed_at", "date", "time", "hlc",
  "t", "ms", "elapsed_ms", "host_ms", "pid", "last_seen", "expires_at"]);
const ISO_TIME = /[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:?[0-9]{2})?/g;
const REPLICA = /(?<![A-Za-z0-9])rep_[0-9a-fA-F]{32}(?![0-9a-fA-F])/g;
const PARITY_KINDS = new Set(["tool_registered", "command_registered", "message", "user_message",
  "injected", "notify", "error"]);

/** [value, "${NAME}"] pairs, longest value first. */
const replacementList = (values) => Object.entries(values).filter(([, v]) => v)
  .map(([name, value]) => [value, `\${${name}}`]).sort((a, b) => b[0].length - a[0].length);

function maskText(text, replacements) {
  let out = text;
  for (const [value, name] of replacements) out = out.replaceAll(value, name);
  return out.replace(ISO_TIME, "<time>").replace(REPLICA, "<replica>");
}

function normalise(value, replacements, key = null) {
  if (key !== null && (key === "id" || key.endsWith("_id"))) return value === null ? null : "<id>";
  if (key !== null && TIME_KEYS.has(key) && value !== null && !isObject(value) && !Array.isArray(value)) {
    return "<time>";
  }
  if (key === "origin_replica" && value !== null) return "<replica>";
  if (isObject(value)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalise(v, replacements, k)]));
  }
  if (Array.isArray(value)) return value.map((v) => normalise(v, replacements));
  if (typeof value === "string") return maskText(value, replacements);
  return value;
}

/** A tool result with each text item that holds a JSON object or array read as `json`. */
function normaliseToolResult(result, replacements) {
  if (!isObject(result) || !Array.isArray(result.content)) return normalise(result, replacements);
  const out = {};
  for (const [k, v] of Object.entries(result)) {
    if (k !== "content") out[k] = normalise(v, replacements, k);
  }
  out.content = result.content.map((item) => {
    if (isObject(item) && item.type === "text" && typeof item.text === "string") {
      const parsed = parseText(item.text);
      if (parsed !== NOTHING) return { type: "text", json: normalise(parsed, replacements) };
    }
    return normalise(item, replacements);
  });
  return out;
}

const errorParts = (error, replacements) => normalise(Object.fromEntries(
  ["kind", "code", "message"].filter((k) => has(error, k)).map((k) => [k, error[k]])), replacements);

function normaliseStep(step, replacements) {
  const out = { ok: step.ok ?? null };
  if (step.failure !== undefined && step.failure !== null) out.failure = maskText(step.failure, replacements);
  if (isObject(step.error)) out.error = errorParts(step.error, replacements);
  const result = step.result ?? null;
  if (step.op === "call_tool") out.result = normaliseToolResult(result, replacements);
  else if (step.op === "call_tools") {
    const calls = isObject(result) && Array.isArray(result.calls) ? result.calls : null;
    out.result = calls === null ? normalise(result, replacements) : {
      calls: calls.map((call) => {
        if (!isObject(call)) return normalise(call, replacements);
        const view = { ok: call.ok ?? null };
        if (isObject(call.error)) view.error = errorParts(call.error, replacements);
        if (has(call, "result")) view.result = normaliseToolResult(call.result, replacements);
        return view;
      }),
    };
  } else if (step.op === "server") out.result = null;
  else out.result = normalise(result, replacements);
  out.effects = (step.effects ?? []).filter((e) => PARITY_KINDS.has(e.kind)).map((e) =>
    (typeof e.custom_type === "string" && e.custom_type !== "" ? `${e.kind}:${e.custom_type}` : e.kind));
  return out;
}

const ABSENT = Symbol("absent");
const escapeToken = (key) => key.replaceAll("~", "~0").replaceAll("/", "~1");

/** The first pointer where two outcomes differ outside `ignore`: {pointer, stdio, http} or null. */
function firstDifference(left, right, ignore, where = "") {
  const bases = ignore.map((p) => p.replace(/\/+$/, ""));
  if (bases.some((base) => where === base || where.startsWith(`${base}/`))) return null;
  if (isObject(left) && isObject(right)) {
    const keys = [...Object.keys(left), ...Object.keys(right).filter((k) => !has(left, k))];
    for (const key of keys) {
      const found = firstDifference(has(left, key) ? left[key] : ABSENT,
        has(right, key) ? right[key] : ABSENT, ignore, `${where}/${escapeToken(key)}`);
      if (found !== null) return found;
    }
    return null;
  }
  if (Array.isArray(left) && Array.isArray(right)) {
    for (let i = 0; i < Math.max(left.length, right.length); i += 1) {
      const found = firstDifference(i < left.length ? left[i] : ABSENT,
        i < right.length ? right[i] : ABSENT, ignore, `${where}/${i}`);
      if (found !== null) return found;
    }
    return null;
  }
  const same = left !== ABSENT && right !== ABSENT && !isObject(left) && !isObject(right)
    && !Array.isArray(left) && !Array.isArray(right) && sameJson(left, right);
  if (same || (left === ABSENT && right === ABSENT)) return null;
  return { pointer: where || "/", stdio: left === ABSENT ? null : left, http: right === ABSENT ? null : right };
}

function judgeParity(settings, runs) {
  const keys = new Set(settings.steps.flatMap((step, index) =>
    (step.transport === undefined ? [step.as ?? String(index)] : [])));
  const compared = (run) => ({
    steps: Object.fromEntries(Object.entries(run.steps ?? {}).filter(([key]) => keys.has(key))),
  });
  return firstDifference(compared(runs.stdio), compared(runs.http), settings.ignore ?? []);
}

function judgeNormalise(options, data) {
  const replacements = replacementList(options.replacements ?? {});
  if (options.as === "value") return normalise(data, replacements);
  if (options.as === "tool_result") return normaliseToolResult(data, replacements);
  return normaliseStep(data, replacements);
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
  if (has(group, "step")) return [judgeStep(group.step, data), test.expected];
  if (has(group, "normalise")) return [judgeNormalise(group.normalise, data), test.expected];
  if (has(group, "parity")) return [judgeParity(group.parity, data), test.expected];
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
