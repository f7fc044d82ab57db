/**
 * The `jobs` queue's consumer: background work that outlives a request, one message per job, each
 * naming its `kind`. In AWS an SQS-triggered function with partial batch responses; locally the same
 * consumer runs in every worker (lambdas/local/queue-workers.ts). A job that fails comes back after
 * the queue's retrySeconds (lambdas/engine/queues.ts) and, past its receives, rests in `jobs-dead`.
 */
import type { Engine, QueueConsumer } from '../engine/ports.js';
import { queueFunction } from './queue-function.js';
import { log } from '../shared/log.js';
import { JOB_KINDS, type Job } from './job-kinds.js';

/** Every message of a batch at once; a job whose run throws is reported failed (it comes back). */
export function jobsConsumer(engine: Engine): QueueConsumer {
  return async (messages) => {
    const failed: string[] = [];
    await Promise.all(
      messages.map(async (message) => {
        let job: Job;
        try {
          job = JSON.parse(message.body) as Job;
        } catch {
          // Not ours to retry: a body that is not JSON never will be.
          log.error('job dropped: its body is not JSON', { message_id: message.id });
          return;
        }
        const run = JOB_KINDS[job?.kind as keyof typeof JOB_KINDS];
        if (!run) {
          log.error('job dropped: unknown kind', { message_id: message.id, kind: String(job?.kind) });
          return;
        }
        try {
          await run(engine, job as never);
        } catch (error) {
          log.warn('job failed; it comes back after its lease', { message_id: message.id, kind: job.kind, error: String(error) });
          failed.push(message.id);
        }
      }),
    );
    return { failed };
  };
}

export const handler = queueFunction('jobs', jobsConsumer);
