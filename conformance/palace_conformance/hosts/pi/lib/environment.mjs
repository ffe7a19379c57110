// What a host's process environment holds, and how a host that was started ahead of its run
// takes its run's environment and directory (`adopt`).

/** The environment variable the runner sets on a host it starts ahead of need (a pooled host):
 * the host then loads what every run needs and waits for `adopt` before anything else. */
export const POOLED_VARIABLE = "PALACE_CONFORMANCE_HOST_POOLED";

/** Whether this host was started ahead of need (read once, before any `adopt` replaces it). */
export const POOLED = process.env[POOLED_VARIABLE] === "1";

/** The bridge sees exactly the environment the runner gave it: the host's own is dropped. */
export function replaceEnvironment(env) {
  for (const key of Object.keys(process.env)) delete process.env[key];
  for (const [key, value] of Object.entries(env)) {
    if (value !== null && value !== undefined) process.env[key] = String(value);
  }
}

/**
 * A pooled host becomes the host of one run: that run's environment and working directory, as
 * if it had been started with them. Returns an error message, or undefined when adopted.
 */
export function adopt(request) {
  const { env, cwd } = request;
  if (!env || typeof env !== "object" || Array.isArray(env)) return "adopt needs 'env': an object of strings";
  if (typeof cwd !== "string" || !cwd) return "adopt needs 'cwd': a directory";
  try {
    process.chdir(cwd);
  } catch (error) {
    return `adopt cannot enter ${cwd}: ${error?.code ?? error?.message ?? error}`;
  }
  replaceEnvironment(env);
  return undefined;
}
