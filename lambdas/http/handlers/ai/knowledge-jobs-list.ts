import { httpHandler } from '../../handler.js';
import { listJobsOf } from '../../../knowledge/jobs/manage.js';

/** GET /v1/knowledge/jobs?limit=&cursor= (docs/ai/knowledge-jobs.md): the application's jobs, newest first, with a sealed cursor. */
export const handler = httpHandler('ai.knowledge.jobs.list', async (req, { engine, principal }) => ({ status: 200, body: await listJobsOf(engine, principal, req.query) }));
