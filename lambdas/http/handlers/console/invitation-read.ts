import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { Invitations } from '../../../console/invitations.js';
import { body } from './shared.js';

const Lookup = z.strictObject({ token: z.string() });

/**
 * POST /console/api/invitation/lookup `{token}`: what the invitation page shows before a password is set.
 * A POST with the token in the body, not a GET with it in the path: access logs record paths.
 */
export const handler = httpHandler('console.invitation.lookup', async (req, { engine }) => {
  const { token } = body(Lookup, req);
  const { invitation, organization } = await new Invitations(engine.kv, () => engine.clock.now()).read(token);
  return {
    status: 200,
    body: { email: invitation.email, role: invitation.role, organization: { id: organization.id, name: organization.name }, expires_at: invitation.expires_at },
  };
});
