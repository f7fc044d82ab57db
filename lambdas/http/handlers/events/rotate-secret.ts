import { workspaceHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { Subscriptions } from '../../../events/subscriptions.js';

/**
 * POST .../subscriptions/{subscription_id}/rotate-secret: the new secret, and until when the previous ones sign.
 * It takes no fields: no body, `{}` or `null`; any field is `400 unknown_field`, as on every other route.
 */
export const handler = workspaceHandler('events.subscriptions.rotate-secret', async (req, { engine, workspace }) => {
  const body = req.json ?? {};
  if (typeof body !== 'object' || Array.isArray(body)) throw new PlatformError('invalid_body', 'The body is empty or {}.');
  const unknown = Object.keys(body)[0];
  if (unknown !== undefined) throw new PlatformError('unknown_field', `Unknown field "${unknown}"; rotate-secret takes no fields.`, unknown);
  return { status: 200, body: await new Subscriptions(engine).rotateSecret(workspace.id, req.params.subscription_id) };
});
