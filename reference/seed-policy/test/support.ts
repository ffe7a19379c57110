/**
 * Test support shared by the copies' own tests: a minimal MCP palace over HTTP that counts pings,
 * and a record of Node's TimeoutOverflowWarning (a delay past 2^31-1 ms reached a timer).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** Every TimeoutOverflowWarning this process has emitted since the module loaded. */
export const overflows: string[] = [];
process.on("warning", (warning) => { if (warning.name === "TimeoutOverflowWarning") overflows.push(warning.message); });

/** Resolves "quiet" after `ms`. */
export const quietFor = (ms: number) => new Promise<"quiet">((resolve) => setTimeout(() => resolve("quiet"), ms));

/** A minimal MCP server over HTTP (JSON answers, no session) counting the pings it gets. */
export async function pingCountingPalace(): Promise<{ url: string; pings: () => number; close: () => Promise<void> }> {
  let pings = 0;
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let body = "";
    request.on("data", (chunk: Buffer) => { body += chunk.toString(); });
    request.on("end", () => {
      if (request.method !== "POST") { response.writeHead(405).end(); return; }
      const message = JSON.parse(body) as { id?: number | string; method: string; params?: { protocolVersion?: string } };
      if (message.id === undefined) { response.writeHead(202).end(); return; }
      if (message.method === "ping") pings += 1;
      const result = message.method === "initialize"
        ? { protocolVersion: message.params?.protocolVersion ?? "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "t", version: "0" } }
        : message.method === "tools/list" ? { tools: [] } : {};
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, pings: () => pings,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }) };
}

/** A palace client as these tests drive it: started, then stopped. */
export interface Startable { start(): Promise<boolean>; stop(): Promise<void> }

/** The pings a client made by `quietMs` after it started against a fresh ping-counting palace. */
export async function pingsSoonAfterStart(client: (url: string) => Startable, quietMs = 300): Promise<number> {
  const palace = await pingCountingPalace();
  const started = client(palace.url);
  try {
    if (!(await started.start())) throw new Error("the client did not start against the test palace");
    await quietFor(quietMs);
    return palace.pings();
  } finally {
    await started.stop();
    await palace.close();
  }
}
