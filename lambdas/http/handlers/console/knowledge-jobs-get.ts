import { httpHandler } from '../../handler.js';
import { getJob } from '../../../knowledge/jobs/manage.js';
import { knowledgeCaller } from './owned.js';

/** GET /console/api/knowledge-jobs/{job_id}[?application_id=]: the job's status, step, progress and spend; another organization's is 404 job_not_found. */
export const handler = httpHandler('console.knowledge-jobs.get', async (req, { engine, principal }) => {
  const caller = await knowledgeCaller(engine, principal, req.query);
  return { status: 200, body: { ...(await getJob(engine, caller.principal, req.params.job_id)) } };
});
