// A request the palace sends the bridge (sampling, elicitation, roots, ...): the bridge offers no
// client capability, so every one is refused at once with JSON-RPC -32601, its message naming the
// method, `Method not found: <method>`, as the other copies answer (TOOL-06's sibling: never leave
// the palace waiting). The SDK's own answer for a method with no handler is a bare "Method not
// found"; its fallback handler's thrown error is sent with that error's `code` and `message`.

import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js";

/** The error the SDK sends back for `method`: code -32601, the method in the message. */
export function methodNotFound(method: string): Error & { code: number } {
  return Object.assign(new Error(`Method not found: ${method}`), { code: ErrorCode.MethodNotFound });
}

/** Make `client` refuse every palace request it has no handler for, naming the method. */
export function refuseServerRequests(client: Client): void {
  client.fallbackRequestHandler = async (request) => {
    throw methodNotFound(request.method);
  };
}
