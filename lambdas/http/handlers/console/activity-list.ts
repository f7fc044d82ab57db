import { httpHandler } from '../../handler.js';
import { activityPage } from '../../activity-page.js';

/**
 * GET /console/api/activity: the organization's activity log, newest first, with GET /v1/activity's
 * filters (from, to, kind, file_sha256), limit and cursor; console actions name the person as actor
 * (`actor_kind: "person"`).
 */
export const handler = httpHandler('console.activity.list', async (req, { engine, principal }) => ({ status: 200, body: await activityPage(engine, principal, req.query) }));
