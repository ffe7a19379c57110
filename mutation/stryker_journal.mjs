// A StrykerJS reporter plugin ("palace-journal") for a drawn sample (python -m mutation.stryker --draw N).
//
// With PALACE_STRYKER_STATE naming the draw's state directory, it writes the run's plan there
// (plan.json: Stryker's mutant id -> the mutant's key, FILE:LINE:COLUMN-LINE:COLUMN:MUTATOR:REPLACEMENT,
// lines 1-based and columns 0-based as `--mutate` ranges have them) before the first mutant runs, so
// stryker/scenarios.mjs can tell a drawn mutant from one Stryker made only because it shares the
// drawn one's range; and it appends the verdict of every drawn mutant to journal.jsonl as soon as
// Stryker has it, so a run cut short keeps what it judged. Verdicts scenarios.mjs replayed from the
// journal (it prints the mark below) are not written again. Without PALACE_STRYKER_STATE it does
// nothing. No import of Stryker's packages: this file lives outside the copies' node_modules.
import fs from "node:fs";
import path from "node:path";

const REPLAYED = "palace-journal: replayed";

export function mutantKey(file, location, mutator, replacement) {
  const { start, end } = location;
  return `${file}:${start.line + 1}:${start.column}-${end.line + 1}:${end.column}:${mutator}:${replacement}`;
}

class Journal {
  static inject = [];
  constructor() {
    this.state = process.env.PALACE_STRYKER_STATE;
    this.plan = new Map();
    this.drawn = new Set();
  }

  onMutationTestingPlanReady({ mutantPlans }) {
    if (!this.state) return;
    const draw = JSON.parse(fs.readFileSync(path.join(this.state, "draw.json"), "utf8"));
    this.drawn = new Set(draw.mutants.map((m) => m.key));
    const rows = {};
    for (const { mutant } of mutantPlans) {
      const file = path.relative(process.cwd(), mutant.fileName).split(path.sep).join("/");
      const key = mutantKey(file, mutant.location, mutant.mutatorName, mutant.replacement);
      this.plan.set(mutant.id, key);
      rows[mutant.id] = key;
    }
    fs.writeFileSync(path.join(this.state, "plan.json"), JSON.stringify(rows));
  }

  onMutantTested(result) {
    if (!this.state) return;
    const key = this.plan.get(result.id);
    if (key === undefined || !this.drawn.has(key)) return;
    const reason = result.statusReason ?? "";
    if (reason.includes(REPLAYED)) return;
    const record = { key, status: result.status, duration: result.duration ?? null,
      reason: reason.slice(-600), at: new Date().toISOString() };
    fs.appendFileSync(path.join(this.state, "journal.jsonl"), `${JSON.stringify(record)}\n`);
  }
}

export const strykerPlugins = [{ kind: "Reporter", name: "palace-journal", injectableClass: Journal }];
