import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { parseStartJob } from '../../../knowledge/jobs/request.js';
import { jobOperation, prepareJob, startJob } from '../../../knowledge/jobs/start.js';

/**
 * POST /v1/knowledge/jobs (spec 4.8; docs/ai/knowledge-jobs.md): 202 `{job_id, poll_after_seconds,
 * status_url}` once per X-Operation-Id (another body under the same id: 409 operation_id_reused); the
 * recording probed and the job priced before any paid work.
 */
export const handler = idempotentHandler('ai.knowledge.jobs.create', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  const request = parseStartJob(req.json);
  return operation.answer(
    jobOperation(engine, principal, request),
    async (running) => ({ ...(await startJob(engine, principal, await prepareJob(engine, principal, request), (answer) => running.completionWrite(answer))) }),
    202,
  );
});
