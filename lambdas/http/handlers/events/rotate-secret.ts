import { workspaceHandler } from '../../handler.js';
import { parseRotateSecretBody, Subscriptions } from '../../../events/subscriptions.js';

/**
 * POST .../subscriptions/{subscription_id}/rotate-secret: the new secret, and until when the previous ones sign.
 * It takes no fields: no body, `{}` or `null`; any field is `400 unknown_field`, as on every other route.
 */
export const handler = workspaceHandler('events.subscriptions.rotate-secret', async (req, { engine, workspace }) => {
  parseRotateSecretBody(req.json);
  return { status: 200, body: await new Subscriptions(engine).rotateSecret(workspace.id, req.params.subscription_id) };
});
