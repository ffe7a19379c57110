// For tests/ts/test_bundles.py: a tool whose parameters are a typebox schema (so pi's validation
// checks its arguments) and whose result names the file typebox's own code ran from: the
// package's files, or the hosts' bundle of it (lib/bundles.mjs).

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import { Value } from "typebox/value";

export default function typeboxOrigin(pi: ExtensionAPI) {
  pi.registerTool({
    name: "typebox_origin", label: "typebox origin", description: "where typebox runs from",
    parameters: Type.Object({ count: Type.Integer({ minimum: 1 }), tag: Type.Optional(Type.String()) }),
    async execute() {
      let where = "typebox did not throw";
      try {
        Value.Parse(Type.Number(), "not a number");
      } catch (error) {
        where = String((error as Error).stack ?? "").split("\n")[1]?.trim() ?? "";
      }
      return { content: [{ type: "text", text: where }], details: undefined };
    },
  });
}
