/**
 * The bridge's own stderr: a few plain lines, debug detail only with MEMPALACE_EXT_DEBUG=1 (which
 * also forwards the child's stderr). Every secret given is replaced in everything written.
 */
import { redactText } from "./errors.ts";

export type Sink = (text: string) => void;

export const STDERR_SINK: Sink = (text) => {
  try {
    process.stderr.write(text);
  } catch {
    // a closed stderr must not break the bridge
  }
};

export class Log {
  readonly debugEnabled: boolean;
  readonly secrets: string[];
  private readonly sink: Sink;

  constructor(sink: Sink = STDERR_SINK, debug = false, secrets: readonly string[] = []) {
    this.sink = sink;
    this.debugEnabled = debug;
    this.secrets = secrets.filter(Boolean);
  }

  redact(text: string): string {
    return redactText(text, this.secrets);
  }

  /** One line, always shown (fail-soft notices, warnings). */
  line(text: string): void {
    this.sink(this.redact(text.split(/\s+/).filter(Boolean).join(" ")) + "\n");
  }

  debug(text: string): void {
    if (this.debugEnabled) this.line(`mempalace[debug]: ${text}`);
  }

  /** Forwarded child stderr, already passed through a SplitSecretGuard (debug mode only). */
  raw(text: string): void {
    if (this.debugEnabled && text) this.sink(this.redact(text));
  }
}
