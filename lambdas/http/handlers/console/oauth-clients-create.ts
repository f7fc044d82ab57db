import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { OAuthClients } from '../../../auth/oauth-clients.js';
import { body, tenantCall } from './shared.js';
import { ownApplication } from './owned.js';

const Create = z.strictObject({ application_id: z.string(), permissions: z.optional(z.array(z.string())) });

/** POST /console/api/oauth-clients `{application_id, permissions?}` → 201 `{client_id, client_secret, permissions}`: the secret is in this answer only. */
export const handler = httpHandler('console.oauth-clients.create', async (req, { engine, principal }) => {
  const input = body(Create, req);
  const app = await ownApplication(engine, principal.organizationId, input.application_id);
  return { status: 201, body: await tenantCall(new OAuthClients(engine.kv, () => engine.clock.now()).create(app.id, { permissions: input.permissions })) };
});
