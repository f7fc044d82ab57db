import { httpHandler } from '../../handler.js';
import { listJobsOf } from '../../../knowledge/jobs/manage.js';
import { knowledgeCaller } from './owned.js';

/** GET /console/api/knowledge-jobs[?application_id=]&limit=&cursor=: the jobs, newest first, as GET /v1/knowledge/jobs lists them for an organization-wide key or the application's. */
export const handler = httpHandler('console.knowledge-jobs.list', async (req, { engine, principal }) => {
  const caller = await knowledgeCaller(engine, principal, req.query);
  return { status: 200, body: await listJobsOf(engine, caller.principal, caller.query) };
});
