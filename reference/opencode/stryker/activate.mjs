// Preloaded into the OpenCode plugin host (NODE_OPTIONS=--import) by stryker/scenarios.mjs: hands the
// host process Stryker's active mutant before the host replaces its environment with the
// scenario's (DRIVER.md `load`), which would drop __STRYKER_ACTIVE_MUTANT__ before the
// instrumented bridge reads it. Stryker's instrumented files read the namespace first.
const id = process.env.__STRYKER_ACTIVE_MUTANT__;
if (id) {
  globalThis.__stryker__ ??= {};
  globalThis.__stryker__.activeMutant ??= id;
}
