import { httpHandler } from '../../handler.js';
import { OAuthClients } from '../../../auth/oauth-clients.js';
import { page, pageOf, tenantCall } from './shared.js';
import { ownApplication } from './owned.js';

/** GET /console/api/oauth-clients[?application_id=]: the organization's OAuth clients (or one application's), oldest first, never a secret. */
export const handler = httpHandler('console.oauth-clients.list', async (req, { engine, principal }) => {
  const clients = new OAuthClients(engine.kv, () => engine.clock.now());
  const appId = req.query.application_id;
  if (appId === undefined) return { status: 200, body: page(await tenantCall(clients.listOrganization(principal.organizationId, pageOf(req)))) };
  const app = await ownApplication(engine, principal.organizationId, appId);
  return { status: 200, body: page(await tenantCall(clients.list(app.id, pageOf(req)))) };
});
