import { httpHandler } from '../../handler.js';
import { getJob } from '../../../knowledge/jobs/manage.js';

/** GET /v1/knowledge/jobs/{job_id} (docs/ai/knowledge-jobs.md): the job's status, step, progress and spend; another application's is 404 job_not_found. */
export const handler = httpHandler('ai.knowledge.jobs.get', async (req, { engine, principal }) => ({ status: 200, body: { ...(await getJob(engine, principal, req.params.job_id)) } }));
