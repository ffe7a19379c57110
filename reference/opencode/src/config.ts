// Every environment knob of the seed bridge this copy reads: the shared reading
// (reference/seed-policy/config.ts), read once at load from a snapshot of the environment
// (LIFE-03); a malformed value falls back to the default with one warning naming the variable
// (KNOB-02), as the Python reference does (reference/palace_bridge/config.py).

export { type Env, parsePreamble, type Preamble, pyRepr, readConfig, type SeedConfig as BridgeConfig }
  from "../../seed-policy/config.ts";
