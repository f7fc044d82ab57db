/**
 * The store the admin CLI acts on, from the settings, with what the operator should know before it
 * writes there: the AWS engine needs the stack's table, and an embedded store that does not exist
 * yet is a new one, not the one a running `npm start` serves.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Engine } from '../engine/ports.js';
import { createEngine } from '../engine/index.js';
import { ENV, SettingsError, settings, type Settings } from '../shared/settings.js';

export interface AdminStore {
  engine: Engine;
  /** Said on stderr before the command runs: where a new store is being created. */
  warning?: string;
}

export async function openAdminStore(config: Settings = settings()): Promise<AdminStore> {
  if (config.engine === 'aws') {
    // Checked here rather than at the first call, which would fail deep inside the engine.
    if (config.tableName === undefined) {
      throw new SettingsError(`ENGINE=aws: ${ENV.tableName} must be set (the stack's TableName output; AWS_ENDPOINT_URL for an emulator)`);
    }
    return { engine: await createEngine(config) };
  }
  const dir = resolve(config.dataDir);
  // `npm start` creates its folder at its first start: a missing one is almost always the wrong
  // working directory or DATA_DIR, and the records written now would not reach that server.
  const warning = existsSync(dir)
    ? undefined
    : `no store at ${dir}: creating a new one there, which no running \`npm start\` serves (set ${ENV.dataDir} to its folder, or run this where its .platform/ is)`;
  return { engine: await createEngine(config), warning };
}
