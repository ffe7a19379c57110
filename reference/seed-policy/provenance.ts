/**
 * Device provenance, stamped at the edge (PROV-*). Only on a shared palace (both gates:
 * MEMPALACE_PI_DEVICE and MEMPALACE_REMOTE_URL) is there a second machine to tell apart; elsewhere
 * the arguments pass through as the very same object. The writer field per tool follows mempalace
 * 3.11's schemas: mempalace_mine has no added_by (it answers -32602), its writer is `agent`.
 */
export const WRITER_FIELDS: Readonly<Record<string, string>> = {
  mempalace_add_drawer: "added_by",
  mempalace_checkpoint: "added_by",
  mempalace_mine: "agent",
  mempalace_event_append: "from_agent",
  mempalace_artifact_put: "created_by",
};
const DIARY_TOOL = "mempalace_diary_write";
const HOST_MARKER = "HOST:";

const unset = (value: unknown): boolean => value === undefined || value === null || (typeof value === "string" && !value.trim());

export class Stamper {
  /** undefined: a gate is missing, nothing is stamped. */
  readonly device?: string;
  readonly harness: string;

  constructor(device: string | undefined, harness = "pi") {
    this.device = device;
    this.harness = harness;
  }

  get active(): boolean {
    return Boolean(this.device);
  }

  get writer(): string {
    return `${this.harness}@${this.device ?? ""}`;
  }

  /** The arguments to send; the same object when inert or the tool is not a write. */
  stamp(tool: string, args: Record<string, unknown>): Record<string, unknown> {
    if (!this.active) return args;
    const field = WRITER_FIELDS[tool];
    if (field !== undefined) {
      if (!unset(args[field])) return args; // an explicit writer: filing on behalf of someone, kept
      return { ...args, [field]: this.writer };
    }
    if (tool === DIARY_TOOL) {
      // 'entry' wins over its alias 'content' on the server, so stamp whichever it will use
      const key = typeof args["entry"] === "string" ? "entry" : "content";
      const text = args[key];
      if (typeof text !== "string" || text.startsWith(HOST_MARKER)) return args;
      return { ...args, [key]: `${HOST_MARKER}${this.device ?? ""}|${text}` };
    }
    return args;
  }
}

export function stamperFor(device: string | undefined, shared: boolean, harness = "pi"): Stamper {
  return new Stamper(device && shared ? device : undefined, harness);
}
