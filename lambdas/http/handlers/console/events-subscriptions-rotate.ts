import { workspaceHandler } from '../../handler.js';
import { parseRotateSecretBody, Subscriptions } from '../../../events/subscriptions.js';

/** POST /console/api/workspaces/{workspace_id}/subscriptions/{subscription_id}/rotate-secret: the new secret (shown once), and until when the previous ones sign. */
export const handler = workspaceHandler('console.subscriptions.rotate-secret', async (req, { engine, workspace }) => {
  parseRotateSecretBody(req.json);
  return { status: 200, body: await new Subscriptions(engine).rotateSecret(workspace.id, req.params.subscription_id) };
});
