/**
 * What the `jobs` queue carries: each kind and the function that runs it; the consumer (./jobs.ts)
 * dispatches on `kind`. The module that owns a kind sends it (`engine.queue.send('jobs', ...)`).
 */
import type { Engine } from '../engine/ports.js';
import { removeVectorDatabase, type RemoveVectorDatabaseJob } from '../vector/databases.js';

export type Job = RemoveVectorDatabaseJob;

export const JOB_KINDS: { [K in Job['kind']]: (engine: Engine, job: Extract<Job, { kind: K }>) => Promise<void> } = {
  'vector-db.remove': removeVectorDatabase,
};
