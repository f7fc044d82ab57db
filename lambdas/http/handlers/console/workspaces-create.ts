import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { Tenants } from '../../../auth/tenants.js';
import { body, tenantCall } from './shared.js';

const Create = z.strictObject({ name: z.string().check(z.minLength(1), z.maxLength(100)) });

/** POST /console/api/workspaces `{name}` → 201 the workspace, as `workspace create` makes it. */
export const handler = httpHandler('console.workspaces.create', async (req, { engine, principal }) => {
  const { name } = body(Create, req);
  return { status: 201, body: await tenantCall(new Tenants(engine.kv, () => engine.clock.now()).createWorkspace(principal.organizationId, name)) };
});
