import type { Engine } from '../engine/ports.js';

export interface RemoveVectorDatabaseJob {
  kind: 'vector-db.remove';
  workspace_id: string;
  database_id: string;
}

export async function removeVectorDatabase(_engine: Engine, _job: RemoveVectorDatabaseJob): Promise<void> {
  throw new Error('not yet');
}
