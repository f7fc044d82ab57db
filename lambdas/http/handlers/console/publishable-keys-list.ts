import { httpHandler } from '../../handler.js';
import { PublishableKeys } from '../../../auth/publishable-keys.js';
import { page, pageOf, tenantCall } from './shared.js';
import { ownApplication } from './owned.js';

/** GET /console/api/publishable-keys[?application_id=]: the organization's publishable keys (or one application's), oldest first, with `last4` and origins. */
export const handler = httpHandler('console.publishable-keys.list', async (req, { engine, principal }) => {
  const keys = new PublishableKeys(engine.kv, () => engine.clock.now());
  const appId = req.query.application_id;
  if (appId === undefined) return { status: 200, body: page(await tenantCall(keys.listOrganization(principal.organizationId, pageOf(req)))) };
  const app = await ownApplication(engine, principal.organizationId, appId);
  return { status: 200, body: page(await tenantCall(keys.list(app.id, pageOf(req)))) };
});
