import { httpHandler } from '../../handler.js';
import { Tenants } from '../../../auth/tenants.js';
import { csrfCookie } from './shared.js';

/** GET /console/api/me: who is signed in, their organization, and the CSRF token to send with changes. */
export const handler = httpHandler('console.me.get', async (req, { engine, principal, session }) => {
  const organization = await new Tenants(engine.kv, () => engine.clock.now()).getOrganization(principal.organizationId);
  return {
    status: 200,
    body: {
      person: principal.person,
      organization: { id: principal.organizationId, name: organization?.name ?? null },
      csrf_token: session?.csrfToken ?? csrfCookie(req) ?? null,
    },
  };
});
