// Test extension: throws while its module is evaluated, before pi could call it.
// The host must answer `load` with an error and keep stdout clean.

console.log("broken-load: about to fail");
throw new Error("broken-load: refusing to load");

export default function never(): void {}
