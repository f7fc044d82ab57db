import { httpHandler } from '../../handler.js';
import { Tenants } from '../../../auth/tenants.js';
import { PlatformError } from '../../../shared/errors.js';
import { page, pageOf, tenantCall } from './shared.js';

/** GET /console/api/applications[?workspace_id=]: the organization's applications (or one workspace's), oldest first. */
export const handler = httpHandler('console.applications.list', async (req, { engine, principal }) => {
  const tenants = new Tenants(engine.kv, () => engine.clock.now());
  const workspaceId = req.query.workspace_id;
  if (workspaceId === undefined) return { status: 200, body: page(await tenantCall(tenants.listOrganizationApplications(principal.organizationId, pageOf(req)))) };
  const ws = await tenants.getWorkspace(workspaceId);
  if (!ws || ws.organization_id !== principal.organizationId) throw new PlatformError('not_found', `No workspace ${workspaceId}.`, 'workspace_id');
  return { status: 200, body: page(await tenantCall(tenants.listApplications(workspaceId, pageOf(req)))) };
});
