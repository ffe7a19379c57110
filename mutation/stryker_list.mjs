// List every mutant StrykerJS makes of a TypeScript copy, with a stable anchor, as JSON on stdout.
//
//   node mutation/stryker_list.mjs COPY_DIR FILE...
//
// Uses the copy's own pinned @stryker-mutator/instrumenter (the one `stryker run` uses, with its
// default mutator options), so the list is exactly what a run over the same files generates. Each
// mutant: file, its location (lines 1-based, columns 0-based, as Stryker's JSON report has them),
// mutator, replacement, the original text, and its anchor FILE::SCOPE::MUTATOR::ORIGINAL=>REPLACEMENT
// (texts cut to 60 characters, on one line), with @N when the scope holds that text more than once.
// SCOPE is the innermost named function, method or class around it (`Class.method`), `<module>`
// outside any: an edit elsewhere in the file keeps the anchor (docs/mutation.md).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [copyDir, ...files] = process.argv.slice(2);
const modules = path.resolve(copyDir, "node_modules");
const load = (spec) => import(pathToFileURL(path.join(modules, spec)).href);
const { Instrumenter } = await load("@stryker-mutator/instrumenter/dist/src/index.js");
const babel = await load("@babel/parser/lib/index.js");
const parse = babel.parse ?? babel.default.parse;

const quiet = { debug() {}, info() {}, warn() {}, error() {}, trace() {}, fatal() {},
  isDebugEnabled: () => false, isTraceEnabled: () => false, isInfoEnabled: () => false,
  isWarnEnabled: () => false, isErrorEnabled: () => false, isFatalEnabled: () => false };

function named(node, parent) {
  const key = node.key ?? node.id;
  if (["ClassDeclaration", "ClassExpression", "FunctionDeclaration", "FunctionExpression",
    "ArrowFunctionExpression", "ClassMethod", "ClassPrivateMethod", "ObjectMethod",
    "TSDeclareMethod"].includes(node.type)) {
    if (key && key.type === "Identifier") return key.name;
    if (key && key.type === "PrivateName") return `#${key.id.name}`;
    if (key && key.type === "StringLiteral") return key.value;
    if (parent && parent.type === "VariableDeclarator" && parent.id.type === "Identifier") return parent.id.name;
    if (parent && ["ObjectProperty", "ClassProperty"].includes(parent.type) && parent.key?.type === "Identifier") return parent.key.name;
    return "<anonymous>";
  }
  return undefined;
}

function scopes(ast) {
  const found = [];
  const walk = (node, parent, trail) => {
    if (!node || typeof node.type !== "string") return;
    const name = named(node, parent);
    const here = name === undefined ? trail : [...trail, name];
    if (name !== undefined) found.push({ start: node.start, end: node.end, name: here.join(".") });
    for (const [key, value] of Object.entries(node)) {
      if (["loc", "leadingComments", "trailingComments", "innerComments", "extra"].includes(key)) continue;
      if (Array.isArray(value)) value.forEach((child) => walk(child, node, here));
      else if (value && typeof value === "object") walk(value, node, here);
    }
  };
  walk(ast.program, null, []);
  return found;
}

function offsetOf(lineStarts, { line, column }) { return lineStarts[line - 1] + column; }
const short = (text) => text.replace(/\s+/g, " ").trim().slice(0, 60);

const out = [];
const instrumenter = new Instrumenter(quiet);
for (const file of files) {
  const content = fs.readFileSync(path.join(copyDir, file), "utf8");
  const result = await instrumenter.instrument([{ name: file, content, mutate: true }],
    { plugins: null, excludedMutations: [], ignorers: [] });
  const lineStarts = [0];
  for (let i = 0; i < content.length; i += 1) if (content[i] === "\n") lineStarts.push(i + 1);
  const ast = parse(content, { sourceType: "module", plugins: ["typescript"], errorRecovery: true });
  const spans = scopes(ast);
  const seen = new Map();
  const rows = [];
  for (const mutant of result.mutants) {
    // the instrumenter's positions: lines 0-based; the report's (and --mutate's): 1-based
    const start = { line: mutant.location.start.line + 1, column: mutant.location.start.column };
    const end = { line: mutant.location.end.line + 1, column: mutant.location.end.column };
    const from = offsetOf(lineStarts, start);
    const to = offsetOf(lineStarts, end);
    const inner = spans.filter((s) => s.start <= from && to <= s.end)
      .sort((a, b) => (a.end - a.start) - (b.end - b.start))[0];
    const scope = inner ? inner.name : "<module>";
    const original = content.slice(from, to);
    const base = `${file}::${scope}::${mutant.mutatorName}::${short(original)}=>${short(mutant.replacement)}`;
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    rows.push({ base, n, file, start, end, mutator: mutant.mutatorName,
      replacement: mutant.replacement, original });
  }
  for (const row of rows) {
    const anchor = seen.get(row.base) > 1 ? `${row.base}@${row.n}` : row.base;
    delete row.base; delete row.n;
    out.push({ anchor, ...row });
  }
}
process.stdout.write(JSON.stringify(out));
