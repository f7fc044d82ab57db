/**
 * First start: a development organization, workspace and secret key, written to
 * DATA_DIR/credentials.json (mode 0600). Later starts read the file and reuse the state.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Engine } from '../engine/ports.js';
import { Tenants } from '../auth/tenants.js';

export interface DevCredentials {
  organization_id: string;
  workspace_id: string;
  key_id: string;
  secret_key: string;
}

export const credentialsPath = (dataDir: string) => join(dataDir, 'credentials.json');

export async function bootstrap(engine: Engine, dataDir: string): Promise<{ credentials: DevCredentials; created: boolean }> {
  const path = credentialsPath(dataDir);
  if (existsSync(path)) return { credentials: JSON.parse(readFileSync(path, 'utf8')), created: false };
  const tenants = new Tenants(engine.kv, () => engine.clock.now());
  const org = await tenants.createOrganization('Development');
  const ws = await tenants.createWorkspace(org.id, 'default');
  const { id, key } = await tenants.createSecretKey(org.id);
  const credentials: DevCredentials = { organization_id: org.id, workspace_id: ws.id, key_id: id, secret_key: key };
  // Written whole or not at all, readable by the owner only.
  writeFileSync(`${path}.tmp`, JSON.stringify(credentials, null, 2) + '\n', { mode: 0o600 });
  renameSync(`${path}.tmp`, path);
  return { credentials, created: true };
}
