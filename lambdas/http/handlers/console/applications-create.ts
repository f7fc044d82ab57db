import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { Tenants } from '../../../auth/tenants.js';
import type { Capability } from '../../../auth/principal.js';
import { PlatformError } from '../../../shared/errors.js';
import { body, tenantCall } from './shared.js';

const Create = z.strictObject({
  workspace_id: z.string(),
  name: z.string().check(z.minLength(1), z.maxLength(100)),
  capabilities: z.optional(z.array(z.string())),
});

/** POST /console/api/applications `{workspace_id, name, capabilities?}` → 201 the application, as `app create` makes it. */
export const handler = httpHandler('console.applications.create', async (req, { engine, principal }) => {
  const input = body(Create, req);
  const tenants = new Tenants(engine.kv, () => engine.clock.now());
  const ws = await tenants.getWorkspace(input.workspace_id);
  if (!ws || ws.organization_id !== principal.organizationId) throw new PlatformError('not_found', `No workspace ${input.workspace_id}.`, 'workspace_id');
  const app = await tenantCall(tenants.createApplication(ws.id, input.name, (input.capabilities ?? []) as Capability[]));
  return { status: 201, body: app };
});
