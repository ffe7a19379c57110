// Test extension: starts a child the host's spawn hook cannot see, as a native addon would,
// through Node's process binding instead of child_process. The host must still find it among
// its children (the kernel's list) and end it with the rest when it exits.

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";

type ProcessWrap = {
  Process: new () => { pid: number; onexit: () => void; spawn(options: object): number };
};

export default function unhookedChild(pi: ExtensionAPI) {
  pi.registerTool({
    name: "start_unhooked", label: "start_unhooked", description: "start a child past the hook",
    parameters: Type.Object({}),
    async execute() {
      const binding = (process as unknown as { binding(name: string): ProcessWrap }).binding("process_wrap");
      const child = new binding.Process();
      child.onexit = () => undefined;
      const ignore = { type: "ignore" };
      const code = child.spawn({ file: "/bin/sleep", args: ["sleep", "60"], stdio: [ignore, ignore, ignore],
        envPairs: [] });
      return { content: [{ type: "text", text: JSON.stringify({ code, pid: child.pid }) }], details: undefined };
    },
  });
}
