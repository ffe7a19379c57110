// Device provenance, stamped at the edge (PROV-*), as reference/palace_bridge/features/provenance.py:
// only on a shared palace (both `MEMPALACE_PI_DEVICE` and `MEMPALACE_REMOTE_URL`) is the writer
// filled in; elsewhere the arguments pass through untouched. The writer field per tool follows
// mempalace 3.11's schemas; the diary entry gets a `HOST:<device>|` prefix.

const WRITER_FIELDS: Readonly<Record<string, string>> = {
  mempalace_add_drawer: "added_by",
  mempalace_checkpoint: "added_by",
  mempalace_mine: "agent",
  mempalace_event_append: "from_agent",
  mempalace_artifact_put: "created_by",
};
const DIARY_TOOL = "mempalace_diary_write";
const HOST_MARKER = "HOST:";

const unset = (value: unknown) => value === undefined || value === null || (typeof value === "string" && value.trim() === "");

export class Stamper {
  readonly device: string | undefined;
  readonly harness: string;

  /** Active only when both gates hold: a device name and a shared (remote) palace. */
  constructor(device: string | undefined, sharedPalace: boolean, harness = "pi") {
    this.device = device && sharedPalace ? device : undefined;
    this.harness = harness;
  }

  stamp(tool: string, args: Record<string, unknown>): Record<string, unknown> {
    if (!this.device) return args;
    const field = WRITER_FIELDS[tool];
    if (field !== undefined) {
      if (!unset(args[field])) return args; // an explicit writer: filing on behalf of someone, kept
      return { ...args, [field]: `${this.harness}@${this.device}` };
    }
    if (tool === DIARY_TOOL) {
      // 'entry' wins over its alias 'content' on the server, so stamp whichever it will use
      const key = typeof args["entry"] === "string" ? "entry" : "content";
      const text = args[key];
      if (typeof text !== "string" || text.startsWith(HOST_MARKER)) return args;
      return { ...args, [key]: `${HOST_MARKER}${this.device}|${text}` };
    }
    return args;
  }
}
