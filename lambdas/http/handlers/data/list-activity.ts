import { httpHandler } from '../../handler.js';
import { requireServer } from '../../../data/databases.js';
import { activityPage } from '../../activity-page.js';

/**
 * GET /v1/activity (spec 4.20): newest first, filters from/to/kind/file_sha256, limit 1..500 (100),
 * opaque cursor. Server credentials only; an application-bound one sees its application's activity.
 * A cursor carries its query: filters sent beside it must be the ones it was made for.
 */
export const handler = httpHandler('data.activity.list', async (req, { engine, principal }) => {
  requireServer(principal, 'read the activity log');
  return { status: 200, body: await activityPage(engine, principal, req.query) };
});
