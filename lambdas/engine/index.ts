/**
 * The process's engine, chosen by configuration (ENGINE=aws in Lambda, embedded by default).
 * Adapters are imported lazily so a Lambda bundle never loads SQLite and the local server never
 * loads what it does not use.
 */
import type { Engine } from './ports.js';
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
  if (config.engine === 'aws') {
    const { createAwsEngine } = await import('./aws/index.js');
    return createAwsEngine(config);
  }
  const { createEmbeddedEngine } = await import('./embedded/index.js');
  return createEmbeddedEngine({ dataDir: config.dataDir });
}
