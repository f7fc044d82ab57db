import { httpHandler } from '../../handler.js';
import { Tenants } from '../../../auth/tenants.js';
import { tenantCall } from './shared.js';

/**
 * POST /console/api/keys/{key_id}/disable: keys are disabled, never deleted; the key answers
 * `403 key_disabled` on the public APIs within CREDENTIAL_CACHE_MS. Another organization's key is
 * `404 key_not_found`, as an unknown one.
 */
export const handler = httpHandler('console.keys.disable', async (req, { engine, principal }) => {
  const tenants = new Tenants(engine.kv, () => engine.clock.now());
  const key = await tenantCall(tenants.setSecretKeyDisabled(req.params.key_id, true, principal.organizationId), 'key_not_found');
  return { status: 200, body: { key } };
});
