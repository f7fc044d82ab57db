import { httpHandler } from '../../handler.js';
import { Invitations } from '../../../console/invitations.js';
import { page, pageOf, tenantCall } from './shared.js';

/** GET /console/api/invitations: the organization's invitations (never a token), oldest first. */
export const handler = httpHandler('console.invitations.list', async (req, { engine, principal }) => {
  return { status: 200, body: page(await tenantCall(new Invitations(engine.kv, () => engine.clock.now()).list(principal.organizationId, pageOf(req)))) };
});
