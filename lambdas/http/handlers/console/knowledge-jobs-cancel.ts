import { httpHandler } from '../../handler.js';
import { cancelJob } from '../../../knowledge/jobs/manage.js';
import { knowledgeCaller } from './owned.js';

/** POST /console/api/knowledge-jobs/{job_id}/cancel[?application_id=]: the job, cancelled (what was paid stays paid); a finished one is 409 job_finished. */
export const handler = httpHandler('console.knowledge-jobs.cancel', async (req, { engine, principal }) => {
  const caller = await knowledgeCaller(engine, principal, req.query);
  return { status: 200, body: { ...(await cancelJob(engine, caller.principal, req.params.job_id)) } };
});
