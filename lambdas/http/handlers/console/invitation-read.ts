import { httpHandler } from '../../handler.js';
import { Invitations } from '../../../console/invitations.js';

/** GET /console/api/invitations/{token}: what the invitation page shows before a password is set. */
export const handler = httpHandler('console.invitations.read', async (req, { engine }) => {
  const { invitation, organization } = await new Invitations(engine.kv, () => engine.clock.now()).read(req.params.token);
  return {
    status: 200,
    body: { email: invitation.email, role: invitation.role, organization: { id: organization.id, name: organization.name }, expires_at: invitation.expires_at },
  };
});
