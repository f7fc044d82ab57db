import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { Tenants } from '../../../auth/tenants.js';
import type { Capability } from '../../../auth/principal.js';
import { body, tenantCall } from './shared.js';
import { ownApplication } from './owned.js';

const Update = z.strictObject({ capabilities: z.array(z.string().check(z.maxLength(64))).check(z.maxLength(16)) });

/**
 * PATCH /console/api/applications/{application_id} `{capabilities}`: the application's capabilities,
 * the whole new list (`400 invalid_body` naming an unknown one); its credentials hold it within
 * CREDENTIAL_CACHE_MS. Another organization's application is 404.
 */
export const handler = httpHandler('console.applications.update', async (req, { engine, principal }) => {
  const app = await ownApplication(engine, principal.organizationId, req.params.application_id);
  const { capabilities } = body(Update, req);
  return { status: 200, body: await tenantCall(new Tenants(engine.kv, () => engine.clock.now()).setApplicationCapabilities(app.id, capabilities as Capability[])) };
});
