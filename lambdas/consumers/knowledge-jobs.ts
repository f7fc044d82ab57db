/**
 * The `knowledge-jobs` queue's consumer (lambdas/knowledge/jobs/consumer.ts): in AWS an SQS-triggered
 * function with partial batch responses; locally a receiver in the background processes
 * (lambdas/local/queue-workers.ts). A finished job publishes `knowledge.job.completed` or
 * `knowledge.job.failed` into its credential's workspace, as the Data API's writes publish theirs
 * (docs/events/platform-events.md): the events module is bound here, where both may be read.
 */
import type { Engine } from '../engine/ports.js';
import { publish } from '../events/publish.js';
import { knowledgeJobsConsumer } from '../knowledge/jobs/consumer.js';
import { jobKey } from '../knowledge/jobs/job-keys.js';
import { PENDING_EVENTS, type JobEvents } from '../knowledge/jobs/pipeline.js';
import { jobView, type Job } from '../knowledge/jobs/records.js';
import { jobSpent } from '../knowledge/jobs/spend.js';
import { log } from '../shared/log.js';
import { queueFunction } from './queue-function.js';

/** Publishes a finished job's event once (its idempotency key is the job's and its status), then clears its pending mark. */
export function jobEvents(engine: Engine): JobEvents {
  return {
    async finished(job: Job) {
      const owner = JSON.parse(job.owner) as Parameters<typeof publish>[1];
      if (owner.workspaceId && (job.status === 'completed' || job.status === 'failed')) {
        const data = jobView(job, await jobSpent(engine, job));
        const answer = await publish(engine, owner, owner.workspaceId, { events: [{ type: `knowledge.job.${job.status}`, data, idempotency_key: `${job.job_id}.${job.status}` }] });
        if (answer.rejected.length) log.error('knowledge job event rejected', { job: job.job_id, rejected: JSON.stringify(answer.rejected) });
      }
      await engine.kv.update({ key: jobKey(job.org, job.app, job.job_id), set: { event_pending: false }, condition: { ifEquals: { event_pending: true } } }).catch(() => undefined);
      await engine.kv.delete({ pk: PENDING_EVENTS, sk: `${job.org}#${job.app}#${job.job_id}` });
    },
  };
}

export const handler = queueFunction('knowledge-jobs', (engine) => knowledgeJobsConsumer(engine, jobEvents(engine)));
