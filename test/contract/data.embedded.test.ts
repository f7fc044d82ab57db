/** The Data service contract on the embedded engine (SQLite + files in a temp dir). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { dataServiceContract } from './data-service-contract.js';

dataServiceContract('embedded (SQLite and files)', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'data-contract-'));
  const engine = createEmbeddedEngine({ dataDir });
  return {
    ...engine,
    async close() {
      await engine.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
});
