import { workspaceHandler } from '../../handler.js';
import { Subscriptions } from '../../../events/subscriptions.js';

/**
 * POST /console/api/workspaces/{workspace_id}/subscriptions: 201 the subscription, with `signing_secret`
 * (shown once) for a webhook; the URL checks' refusals are the Events API's (`url_*` codes, `param: "url"`).
 */
export const handler = workspaceHandler('console.subscriptions.create', async (req, { engine, workspace }) => ({
  status: 201,
  body: await new Subscriptions(engine).create(workspace.id, req.json),
}));
