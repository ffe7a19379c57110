// reloadable.ts with one planted defect (LIFE-06): a session_shutdown whose reason is "reload" is
// ignored, so the child of the instance pi drops keeps running next to the new instance's child.

import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

import { reloadable } from "./reloadable.ts";

export default function (pi: ExtensionAPI): void {
  reloadable(pi, { leakOnReload: true });
}
