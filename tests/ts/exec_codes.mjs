// Run a few programs through pi 1.x's real `execCommand` and through the extension host's stand-in
// (`runExec` in hosts/pi/lib/fake-pi.mjs); print what each reports, one JSON line.
// argv: <pi-coding-agent package dir> <fake-pi.mjs> <cases JSON: [{name, argv, timeout_ms}]>
import { pathToFileURL } from "node:url";
import path from "node:path";

const [piDir, fakePi, casesJson] = process.argv.slice(2);
const { execCommand } = await import(pathToFileURL(path.join(piDir, "dist", "core", "exec.js")).href);
const { runExec } = await import(pathToFileURL(fakePi).href);
const out = {};
for (const { name, argv, timeout_ms: timeout } of JSON.parse(casesJson)) {
  const [command, ...args] = argv;
  const real = await execCommand(command, args, process.cwd(), { timeout });
  const fake = await runExec(command, args, { cwd: process.cwd(), timeout });
  out[name] = {
    pi: { code: real.code, killed: real.killed, stderr: real.stderr !== "" },
    host: { code: fake.code, killed: fake.killed, stderr: fake.stderr !== "" },
  };
}
process.stdout.write(`${JSON.stringify(out)}\n`);
