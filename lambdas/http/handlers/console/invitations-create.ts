import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { expiryOf, invitationUrl, Invitations } from '../../../console/invitations.js';
import { consoleUrl } from '../../console-origin.js';
import { actorOf, body } from './shared.js';

const Create = z.strictObject({ email: z.string(), role: z.string(), expires_in_hours: z.optional(z.number()) });

/**
 * POST /console/api/invitations `{email, role, expires_in_hours?}` → 201 `{invitation_url, expires_at,
 * invitation}`: the link is shown this once (only the token's hash is kept). Admins and owners invite up
 * to their own role.
 */
export const handler = httpHandler('console.invitations.create', async (req, scope) => {
  const { engine } = scope;
  const input = body(Create, req);
  const actor = actorOf(scope);
  const expiresInMs = input.expires_in_hours === undefined ? undefined : expiryOf(input.expires_in_hours, 'expires_in_hours');
  const { invitation, token } = await new Invitations(engine.kv, () => engine.clock.now()).create({
    organizationId: actor.organizationId,
    email: input.email,
    role: input.role,
    expiresInMs,
    inviter: actor,
  });
  return { status: 201, body: { invitation_url: invitationUrl(consoleUrl(), token), expires_at: invitation.expires_at, invitation } };
});
