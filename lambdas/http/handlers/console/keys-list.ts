import { httpHandler } from '../../handler.js';
import { Tenants } from '../../../auth/tenants.js';
import { page, pageOf, tenantCall } from './shared.js';

/**
 * GET /console/api/keys[?application_id=]: the organization's secret keys as the admin CLI's `key list`
 * reads them, each with the secret's last 4 characters (`last4`), never the secret nor its hash.
 */
export const handler = httpHandler('console.keys.list', async (req, { engine, principal }) => {
  const tenants = new Tenants(engine.kv, () => engine.clock.now());
  const list = await tenantCall(tenants.listSecretKeys(principal.organizationId, { ...pageOf(req), applicationId: req.query.application_id }));
  return { status: 200, body: page(list) };
});
