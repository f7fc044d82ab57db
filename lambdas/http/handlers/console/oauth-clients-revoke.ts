import { httpHandler } from '../../handler.js';
import { OAuthClients } from '../../../auth/oauth-clients.js';
import { tenantCall } from './shared.js';
import { ownOAuthClient } from './owned.js';

/** POST /console/api/oauth-clients/{client_id}/revoke: the client, revoked; its tokens stop working within CREDENTIAL_CACHE_MS. */
export const handler = httpHandler('console.oauth-clients.revoke', async (req, { engine, principal }) => {
  const client = await ownOAuthClient(engine, principal.organizationId, req.params.client_id);
  return { status: 200, body: await tenantCall(new OAuthClients(engine.kv, () => engine.clock.now()).revoke(client.client_id)) };
});
