/**
 * Constants a Lambda bundle is built with (bundleDefines in lib/function-defaults.ts): esbuild replaces
 * each `globalThis.PLATFORM_…` below with its value, folds the conditions that test it, and leaves out
 * what a constant condition never reaches, with all it imports (docs/decisions/lambda-bundles.md).
 * Unbundled (the local server, the admin CLI, tests) they are undefined, and every branch is live.
 */
declare global {
  /** "lambda" in every function's bundle: the engine is the AWS one, the embedded one is left out. */
  var PLATFORM_BUNDLE: 'lambda' | undefined;
  /** "absent" in the bundle of a function built without that port of the AWS engine (its grants give none). */
  var PLATFORM_PORT_BLOBS: 'absent' | undefined;
  var PLATFORM_PORT_QUEUE: 'absent' | undefined;
  var PLATFORM_PORT_CONNECTIONS: 'absent' | undefined;
  var PLATFORM_PORT_SECRET: 'absent' | undefined;
  var PLATFORM_PORT_UPSTREAM_KEYS: 'absent' | undefined;
  var PLATFORM_PORT_VECTORS: 'absent' | undefined;
}

export {};
