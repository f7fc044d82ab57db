/**
 * Reading and cancelling knowledge jobs (docs/ai/knowledge-jobs.md, "Read and manage"). A cancel
 * moves a queued or running job to `cancelled` with one conditional write: the step running then
 * loses its lease and stops at its next check; what was paid stays paid, the rest of the estimate's
 * holds is given back, and its scratch files are removed.
 */
import type { Principal } from '../../auth/principal.js';
import type { Engine, KvWrite } from '../../engine/ports.js';
import { TransactionCanceledError } from '../../engine/errors.js';
import { checkReplay, type OperationContext } from '../../ai/operations.js';
import { PlatformError } from '../../shared/errors.js';
import { holdMs } from '../../shared/hold-margin.js';
import type { OperationCall } from '../../shared/operations.js';
import { JOB_SWEEP_PARTITION, jobKey } from './job-keys.js';
import { afterFinish } from './pipeline.js';
import { FINISHED, FINISHED_JOB_SECONDS, jobView, listJobs, readJob, type JobView } from './records.js';
import { jobSpent } from './spend.js';

export async function getJob(engine: Engine, principal: Principal, id: string): Promise<JobView> {
  const job = await readJob(engine, principal, id);
  return jobView(job, await jobSpent(engine, job));
}

export const listJobsOf = (engine: Engine, principal: Principal, query: Record<string, string>) => listJobs(engine, principal, query, (job) => jobSpent(engine, job));

export function cancelOperation(engine: Engine, principal: Principal, id: string): OperationCall<OperationContext> {
  const context: OperationContext = { endpoint: `/v1/knowledge/jobs/${id}`, route: null, application: principal.applicationId, capability: 'knowledge' };
  return { tenant: principal.organizationId, holdSeconds: holdMs(30_000) / 1000, context, checkReplay: (kept) => checkReplay(engine, principal, context, kept) };
}

/** DELETE /v1/knowledge/jobs/{job_id}: the job as cancelled; `409 job_finished` once it ended. */
export async function cancelJob(engine: Engine, principal: Principal, id: string): Promise<JobView> {
  for (;;) {
    const job = await readJob(engine, principal, id);
    if (FINISHED.has(job.status)) throw new PlatformError('job_finished', `Job "${id}" is ${job.status} already.`, 'job_id');
    const now = engine.clock.now();
    const set = { status: 'cancelled', lease_until: 0, lease_sk: null, updated_at: new Date(now).toISOString(), expires_at: Math.floor(now / 1000) + FINISHED_JOB_SECONDS };
    const writes: KvWrite[] = [{ update: jobKey(job.org, job.app, job.job_id), set, condition: { ifEquals: { status: job.status, step: job.step, attempt: job.attempt } } }];
    if (job.lease_sk) writes.push({ delete: { pk: JOB_SWEEP_PARTITION, sk: job.lease_sk } });
    try {
      await engine.kv.transact(writes);
    } catch (error) {
      if (error instanceof TransactionCanceledError) continue; // it moved on meanwhile: read it again
      throw error;
    }
    const cancelled = { ...job, ...(set as object), status: 'cancelled' as const };
    await afterFinish(engine, cancelled);
    return jobView(cancelled, await jobSpent(engine, job));
  }
}
