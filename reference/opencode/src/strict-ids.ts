// JSON-RPC id discipline (TOOL-06) between the SDK's `Client` and its transport: an answer counts
// only when its id is one the bridge sent, in the same JSON type (`"2"` does not answer `2`).
//
// The SDK matches answers by `Number(response.id)`, so a retyped id would answer the request. This
// wrapper drops any response whose id was never sent (or was answered already) before the
// `Client` sees it; requests and notifications from the palace pass untouched.

import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage, MessageExtraInfo } from "@modelcontextprotocol/sdk/types.js";

/** An id with its JSON type: `number:2` and `string:2` are different ids. */
export function idKey(id: unknown): string | undefined {
  if (typeof id === "number" || typeof id === "string") return `${typeof id}:${String(id)}`;
  return undefined;
}

/** A response (`result` or `error`, no `method`): the only kind of message an id is checked on. */
function isResponse(message: Record<string, unknown>): boolean {
  return !("method" in message) && ("result" in message || "error" in message);
}

export class StrictIds implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;

  readonly inner: Transport;
  /** The ids of requests sent and not yet answered. */
  private readonly waiting = new Set<string>();
  /** Notifications handed to the transport and not yet sent. */
  private readonly notices = new Set<Promise<void>>();

  constructor(inner: Transport) {
    this.inner = inner;
  }

  get sessionId(): string | undefined {
    return this.inner.sessionId;
  }

  setProtocolVersion(version: string): void {
    this.inner.setProtocolVersion?.(version);
  }

  /** Whether `message` may reach the client; an answered or unknown id is dropped (and said on onerror). */
  admit(message: JSONRPCMessage): boolean {
    const record = message as Record<string, unknown>;
    if (!isResponse(record)) return true;
    const key = idKey(record["id"]);
    if (key !== undefined && this.waiting.delete(key)) return true;
    this.onerror?.(new Error(`ignored an answer to an id the bridge did not send: ${JSON.stringify(record["id"])}`));
    return false;
  }

  start(): Promise<void> {
    this.inner.onmessage = (message, extra) => {
      if (this.admit(message)) this.onmessage?.(message, extra);
    };
    this.inner.onerror = (error) => this.onerror?.(error);
    this.inner.onclose = () => this.onclose?.();
    return this.inner.start();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const record = message as Record<string, unknown>;
    if ("method" in record) {
      const key = idKey(record["id"]);
      if (key !== undefined) this.waiting.add(key);
    }
    const sending = this.inner.send(message, options);
    if ("method" in record && !("id" in record)) {
      // a notification (a timed-out call's cancel) the SDK sends without waiting: kept until sent
      this.notices.add(sending);
      sending.catch(() => undefined).finally(() => this.notices.delete(sending));
    }
    return sending;
  }

  /** Wait (up to `ms`) for the notifications on their way out, so closing does not cut them off. */
  async noticesSent(ms: number): Promise<void> {
    if (this.notices.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.notices]), new Promise((resolve) => { timer = setTimeout(resolve, ms); })]);
    clearTimeout(timer);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
