/**
 * The knowledge jobs sweep in AWS: an EventBridge rule invokes this function every minute
 * (lib/knowledge-jobs.ts). It sends again the step of each job whose processor died (its lease entry
 * is due) and publishes the events of finished jobs a crash left unsent (sweepJobs,
 * lambdas/knowledge/jobs/pipeline.ts); a page of due entries a run, the next run takes the rest.
 */
import type { Context } from 'aws-lambda';
import { getEngine } from '../engine/index.js';
import { sweepJobs } from '../knowledge/jobs/pipeline.js';
import { inRequest, log } from '../shared/log.js';
import { jobEvents } from './knowledge-jobs.js';

/** Lines name the invocation (`request_id`). */
export function handler(_event?: unknown, context?: Context): Promise<{ swept: number }> {
  return inRequest({ request_id: context?.awsRequestId }, async () => {
    const engine = await getEngine();
    const swept = await sweepJobs(engine, jobEvents(engine));
    if (swept) log.info('knowledge jobs swept', { lease_entries: swept });
    return { swept };
  });
}
