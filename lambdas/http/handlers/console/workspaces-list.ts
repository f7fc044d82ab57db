import { httpHandler } from '../../handler.js';
import { Tenants } from '../../../auth/tenants.js';
import { page, pageOf, tenantCall } from './shared.js';

/** GET /console/api/workspaces: the organization's workspaces, oldest first. */
export const handler = httpHandler('console.workspaces.list', async (req, { engine, principal }) => {
  return { status: 200, body: page(await tenantCall(new Tenants(engine.kv, () => engine.clock.now()).listWorkspaces(principal.organizationId, pageOf(req)))) };
});
