/**
 * Every environment knob of the seed bridge with the seed's default, read once at load (LIFE-03):
 * the shared reading (reference/seed-policy/config.ts; a malformed value falls back to the default
 * with one warning naming the variable, KNOB-02), plus the harness this copy stamps.
 */

import { DEFAULTS as SEED_DEFAULTS, type Env, readConfig as readSeedConfig, type SeedConfig } from "../../seed-policy/config.ts";

export { type Env, isRecord, parsePreamble, type Preamble } from "../../seed-policy/config.ts";

export const DEFAULTS = { ...SEED_DEFAULTS, harness: "pi" } as const;

/** The shared knobs (reference/seed-policy/config.ts) and the harness this copy stamps (PROV-*). */
export interface BridgeConfig extends SeedConfig {
  harness: string;
}

/** Both provenance gates hold: a device name and a shared (remote) palace. */
export function sharedPalace(config: BridgeConfig): boolean {
  return Boolean(config.device) && Boolean(config.remoteUrl);
}

export function readConfig(env: Env): BridgeConfig {
  return { ...readSeedConfig(env), harness: DEFAULTS.harness };
}
