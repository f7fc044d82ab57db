/**
 * The process's engine, chosen by configuration (ENGINE=aws in Lambda, embedded by default).
 * Adapters are imported lazily so the local server never loads what it does not use.
 *
 * A Lambda bundle must not even mention the embedded adapter: esbuild inlines a dynamic import into
 * the single-file bundle and hoists the adapter's import of the native `better-sqlite3` to a static
 * import, which Node resolves before any code runs, so every function would fail at init. A Lambda
 * bundle is built with `globalThis.PLATFORM_BUNDLE` defined as "lambda" (adapter-kit/bundle-defines.ts): the
 * condition below is then the constant `true`, the embedded branch is dead code, and esbuild leaves it
 * and all it imports out (docs/decisions/lambda-bundles.md). Unbundled, it is undefined and the choice
 * is made at run time.
 */
import type { Engine } from './ports.js';
import type { EventBusSender } from './event-bus.js';
import { onFirstCall } from './adapter-kit/memo.js';
import { settings, type Settings } from '../shared/settings.js';

let current: Promise<Engine> | undefined;

export function getEngine(): Promise<Engine> {
  current ??= createEngine();
  return current;
}

/** Installs a specific engine (the local server and tests build theirs explicitly). */
export function useEngine(engine: Engine): void {
  current = Promise.resolve(engine);
}

export async function createEngine(config: Settings = settings()): Promise<Engine> {
  // An if/else, not an early return: esbuild drops a constant-false branch with its imports.
  if (globalThis.PLATFORM_BUNDLE === 'lambda' || config.engine === 'aws') {
    const { createAwsEngine } = await import('./aws/index.js');
    return createAwsEngine(config);
  } else {
    const { createEmbeddedEngine } = await import('./embedded/index.js');
    return createEmbeddedEngine({ dataDir: config.dataDir });
  }
}

/**
 * The event-bus port (EventBridge's PutEvents, engine/event-bus.ts), on AWS and locally alike: locally
 * it puts on the EventBridge-compatible endpoint AWS_ENDPOINT_URL names. Its SDK client and adapter
 * load at the first delivery to a bus, so no other function's cold start pays for them.
 */
export function eventBusSender(): EventBusSender {
  return onFirstCall(async () => new (await import('./aws/event-bus.js')).AwsEventBusSender());
}
