import { httpHandler } from '../../handler.js';
import { PublishableKeys } from '../../../auth/publishable-keys.js';
import { tenantCall } from './shared.js';
import { ownPublishableKey } from './owned.js';

/** POST /console/api/publishable-keys/{key_id}/disable: the key record; it answers `403 key_disabled` and leaves CORS. */
export const handler = httpHandler('console.publishable-keys.disable', async (req, { engine, principal }) => {
  const key = await ownPublishableKey(engine, principal.organizationId, req.params.key_id);
  return { status: 200, body: await tenantCall(new PublishableKeys(engine.kv, () => engine.clock.now()).disable(key.id), 'key_not_found') };
});
