import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { Tenants } from '../../../auth/tenants.js';
import { body, tenantCall } from './shared.js';

const Create = z.strictObject({ application_id: z.optional(z.string()), permissions: z.optional(z.array(z.string())) });

/**
 * POST /console/api/keys `{application_id?, permissions?}` → 201 `{key, secret}`: the secret `aik_…` is
 * in this answer only (only its hash is kept), as the admin CLI's `key create` gives it.
 */
export const handler = httpHandler('console.keys.create', async (req, { engine, principal }) => {
  const input = body(Create, req);
  const tenants = new Tenants(engine.kv, () => engine.clock.now());
  const { key, record } = await tenantCall(tenants.createSecretKey(principal.organizationId, input.application_id, { permissions: input.permissions }));
  return { status: 201, body: { key: record, secret: key } };
});
