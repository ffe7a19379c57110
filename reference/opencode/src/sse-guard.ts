// The answer stream of one POST (text/event-stream), made readable by the SDK and bounded
// (HTTP-10, HTTP-12, TOOL-06).
//
// Two things the SDK's stream reader does not do, done here on the bytes before it sees them:
// - every line ending the SSE standard allows (CRLF, LF, lone CR, also split across reads)
//   becomes LF, so a stream of lone-CR lines is read as events;
// - a stream that ends before the answer to the request it carries, with no event `id` to resume
//   from, can never be answered: the SDK would wait for the request timeout. The guard then ends
//   the stream with a JSON-RPC error for that request marked as the bridge's own
//   (`data.bridge` = ANSWER_STREAM_CLOSED), which the copy reports as a protocol error at once.
// A stream that carried an event id is left to the SDK's resuming GET (Last-Event-ID).

import { idKey } from "./strict-ids.ts";

export const ANSWER_STREAM_CLOSED = "mempalace-opencode:answer-stream-closed";
/** The code of the guard's own error: JSON-RPC's "server error" range, never a palace's answer. */
const GUARD_CODE = -32000;
/** A cap on one event's text (a palace that never ends an event must not grow the buffer without bound). */
const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/** The ids of the requests in a POST body (one message or a batch), each with its JSON type. */
export function requestIds(body: unknown): Map<string, string | number> {
  const ids = new Map<string, string | number>();
  if (typeof body !== "string") return ids;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return ids;
  }
  for (const message of Array.isArray(parsed) ? parsed : [parsed]) {
    if (!message || typeof message !== "object") continue;
    const record = message as Record<string, unknown>;
    const id = record["id"];
    const key = idKey(id);
    if (typeof record["method"] === "string" && key !== undefined) ids.set(key, id as string | number);
  }
  return ids;
}

/** Lone CR and CRLF to LF, with a CR at the end of one read and LF at the start of the next seen as one ending. */
export class LineEndings {
  private afterCR = false;

  feed(text: string): string {
    let input = text;
    if (this.afterCR && input.startsWith("\n")) input = input.slice(1);
    if (input === "") return "";
    this.afterCR = input.endsWith("\r");
    return input.replace(/\r\n?/g, "\n");
  }
}

/** Which of `waiting` the events in LF-ended text answer, and whether any event carried an id. */
export class AnswerWatch {
  sawEventId = false;
  /** The last event id the stream carried (what a resuming GET sends as Last-Event-ID). */
  lastEventId: string | undefined;
  private readonly waiting: Map<string, string | number>;
  private held = "";

  constructor(waiting: Map<string, string | number>) {
    this.waiting = new Map(waiting);
  }

  /** The requests still without an answer. */
  get unanswered(): (string | number)[] {
    return [...this.waiting.values()];
  }

  feed(text: string): void {
    this.held += text;
    for (;;) {
      const end = this.held.indexOf("\n\n");
      if (end < 0) break;
      this.event(this.held.slice(0, end));
      this.held = this.held.slice(end + 2);
    }
    if (this.held.length > MAX_EVENT_CHARS) this.held = "";
  }

  private event(block: string): void {
    let type = "";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "id" && value !== "") {
        this.sawEventId = true;
        this.lastEventId = value;
      }
      else if (field === "event") type = value;
      else if (field === "data") data.push(value);
    }
    if ((type !== "" && type !== "message") || data.length === 0) return;
    let message: unknown;
    try {
      message = JSON.parse(data.join("\n"));
    } catch {
      return;
    }
    for (const item of Array.isArray(message) ? message : [message]) {
      if (!item || typeof item !== "object" || "method" in item) continue;
      const record = item as Record<string, unknown>;
      if (!("result" in record) && !("error" in record)) continue;
      const key = idKey(record["id"]);
      if (key !== undefined) this.waiting.delete(key);
    }
  }
}

/** The SSE event that ends a request the stream cannot answer. */
function closedEvent(id: string | number, message = "the answer stream ended without the answer and without an event id to resume from"): string {
  const answer = { jsonrpc: "2.0", id, error: { code: GUARD_CODE, message, data: { bridge: ANSWER_STREAM_CLOSED } } };
  return `event: message\ndata: ${JSON.stringify(answer)}\n\n`;
}

/** The requests a closed stream left unanswered, by the event id a resuming GET names. */
const resumable = new Map<string, (string | number)[]>();

/**
 * The answer to a resuming GET the palace refused (a non-2xx status: it did not serve the
 * request, whatever its body says): the requests that stream carried end at once as protocol
 * errors, where the SDK would retry the GET a few times and leave them to their timeout
 * (HTTP-12, as the reference fails the call). Undefined when the GET is not one of ours.
 */
export function refusedResume(lastEventId: string | null): Response | undefined {
  const ids = lastEventId === null ? undefined : resumable.get(lastEventId);
  if (!ids || lastEventId === null) return undefined;
  resumable.delete(lastEventId);
  // no status in the words: a host reads "HTTP 500" as an HTTP error and "401" as auth, where
  // this is the reference's protocol error whatever the status (http.sse.resume-answered-*)
  const text = ids.map((id) => closedEvent(id, "the palace refused to resume the answer stream (the resuming GET was not answered with a 2xx event stream): it cannot replay")).join("");
  return new Response(text, { status: 200, headers: { "content-type": "text/event-stream" } });
}

/** `response` with its event stream normalised and bounded as above. */
export function guardAnswerStream(response: Response, ids: Map<string, string | number>): Response {
  if (!response.body) return response;
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  const endings = new LineEndings();
  const watch = new AnswerWatch(ids);
  const pass = (text: string, controller: TransformStreamDefaultController<Uint8Array>) => {
    const normal = endings.feed(text);
    if (normal === "") return;
    watch.feed(normal);
    controller.enqueue(encoder.encode(normal));
  };
  const body = response.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      pass(decoder.decode(chunk, { stream: true }), controller);
    },
    flush(controller) {
      pass(decoder.decode(), controller);
      if (watch.sawEventId) {
        if (watch.lastEventId !== undefined && watch.unanswered.length > 0) resumable.set(watch.lastEventId, watch.unanswered);
        return;
      }
      // an event still open at the end is ended first, so the guard's event stands alone
      const tail = watch.unanswered.map((id) => closedEvent(id)).join("");
      if (tail !== "") controller.enqueue(encoder.encode(`\n\n${tail}`));
    },
  }));
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
