// Running the feed helper (FEED-01). pi hands its extensions `pi.exec`; an OpenCode plugin gets
// Bun's shell (`$`), which is undefined outside Bun and always a shell, so the copy runs the program
// itself with node:child_process (Bun has it too): no shell, stdin closed, stdout and stderr
// captured, and on its own timeout SIGTERM, then SIGKILL 5 s later, as pi's exec does. `killed`
// flags only that timeout; a death by a signal is 128 + the signal's number (pi's exec reports the same).

import { spawn } from "node:child_process";
import { constants } from "node:os";
import type { Exec, ExecResult } from "../../seed-policy/feeding.ts";
import { timerMs } from "../../seed-policy/timer.ts";

export type { Exec, ExecResult };

const FORCE_KILL_MS = 5000;

/** The exec the copy feeds with: `env` is the environment captured at load (LIFE-03). */
export function execWith(env: NodeJS.ProcessEnv): Exec {
  return (command, args, timeoutMs) => new Promise<ExecResult>((resolve) => {
    const child = spawn(command, args, { shell: false, stdio: ["ignore", "pipe", "pipe"], env });
    let stdout = "";
    let stderr = "";
    let killed = false;
    let force: NodeJS.Timeout | undefined;
    child.stdout.setEncoding("utf8").on("data", (text: string) => { stdout += text; });
    child.stderr.setEncoding("utf8").on("data", (text: string) => { stderr += text; });
    const timer = timeoutMs !== undefined && timeoutMs > 0 ? setTimeout(() => {
      killed = true;
      child.kill("SIGTERM");
      force = setTimeout(() => { if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL"); }, FORCE_KILL_MS);
    }, timerMs(timeoutMs)) : undefined;
    let done = false;
    const settle = (result: ExecResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(force);
      resolve(result);
    };
    // a program that cannot be started (ENOENT): its error's text, code 1
    child.on("error", (error) => settle({ stdout, stderr: stderr || error.message, code: 1, killed }));
    child.on("close", (code, signal) => {
      const number = signal ? constants.signals[signal] : undefined;
      settle({ stdout, stderr, code: code ?? (number !== undefined ? 128 + number : 1), killed });
    });
  });
}
