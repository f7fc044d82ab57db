import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { cancelJob, cancelOperation } from '../../../knowledge/jobs/manage.js';

/** DELETE /v1/knowledge/jobs/{job_id} (docs/ai/knowledge-jobs.md): cancels it, once per X-Operation-Id; a finished job is 409 job_finished. */
export const handler = idempotentHandler('ai.knowledge.jobs.cancel', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  const id = req.params.job_id;
  return operation.answer(cancelOperation(engine, principal, id), () => cancelJob(engine, principal, id));
});
