// Test extension: writes to stdout every way a Node program can (console.log, process.stdout
// .write, a child that inherits stdout). None of it may reach the driver protocol channel.

import { spawnSync, spawn } from "node:child_process";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "@sinclair/typebox";

export default function noisy(pi: ExtensionAPI) {
  console.log("noisy: console.log at load");
  process.stdout.write("noisy: stdout.write at load\n");
  console.error("noisy: console.error at load");
  spawnSync("sh", ["-c", "echo noisy: child inherited stdout"], { stdio: "inherit" });
  pi.registerTool({
    name: "noisy_echo",
    label: "noisy echo",
    description: "prints to stdout, then echoes its text",
    parameters: Type.Object({ text: Type.String(), times: Type.Optional(Type.Integer({ minimum: 1 })) }),
    async execute(_id, params: { text: string; times?: number }) {
      console.info(`noisy: echo ${params.text}`);
      await new Promise<void>((resolve) => {
        spawn("sh", ["-c", "echo noisy: async child stdout"], { stdio: "inherit" }).on("close", () => resolve());
      });
      return { content: [{ type: "text", text: params.text.repeat(params.times ?? 1) }], details: { times: params.times } };
    },
  });
}
