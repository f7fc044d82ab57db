/** Starts the real local platform (embedded engine on a temp dir, ports picked by the OS) for API tests. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { bootstrap, type DevCredentials } from '../../lambdas/local/bootstrap.js';
import { startPlatform } from '../../lambdas/local/platform.js';
import type { Api } from '../../lambdas/shared/api.js';
import type { Clock } from '../../lambdas/engine/ports.js';
import { registerApiOrigins } from './platform-origins.js';

export interface TestPlatform {
  urls: Record<Api, string>;
  /** The console's URL (its pages and `/console/api/…`), when asked for with `console`. */
  consoleUrl?: string;
  credentials: DevCredentials;
  engine: EmbeddedEngine;
  dataDir: string;
  close(): Promise<void>;
}

/** `console`: serve the console too (on a free port), its pages from `consoleDist` when given. */
export async function startTestPlatform(options: { clock?: Clock; console?: boolean; consoleDist?: string } = {}): Promise<TestPlatform> {
  process.env.LOG_LEVEL ??= 'silent';
  const dataDir = mkdtempSync(join(tmpdir(), 'platform-'));
  const engine = createEmbeddedEngine({ dataDir, clock: options.clock });
  const { credentials } = await bootstrap(engine, dataDir);
  const platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 }, ...(options.console ? { consolePort: 0, consoleDist: options.consoleDist } : {}) });
  registerApiOrigins(platform.urls);
  return {
    urls: platform.urls,
    consoleUrl: platform.consoleUrl,
    credentials,
    engine,
    dataDir,
    close: async () => {
      await platform.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
