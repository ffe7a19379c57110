// OpenCode wants a tool's arguments as a zod shape and checks calls against it; the seed wants the
// palace's JSON Schema passed through untouched (TOOL-01). So each property becomes `z.any()`
// (optional unless the schema requires it: the check lets every value through and keeps every
// declared key), and the `tool.definition` hook hands the LLM the palace's own schema.

import { tool } from "@opencode-ai/plugin";

type Shape = Parameters<typeof tool>[0]["args"];

export function argsShape(schema: Record<string, unknown>): Shape {
  const z = tool.schema;
  const properties = schema["properties"];
  const required = new Set(Array.isArray(schema["required"]) ? schema["required"].filter((x): x is string => typeof x === "string") : []);
  const names = properties && typeof properties === "object" ? Object.keys(properties) : [];
  const shape: Shape = Object.fromEntries(names.map((name) => [name, required.has(name) ? z.any() : z.any().optional()]));
  return shape;
}
