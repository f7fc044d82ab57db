import { httpHandler } from '../../handler.js';
import { Invitations } from '../../../console/invitations.js';
import { actorOf } from './shared.js';

/** DELETE /console/api/invitations/{invitation_id}: withdraws it; its link then answers 404 invitation_not_found. */
export const handler = httpHandler('console.invitations.delete', async (req, scope) => {
  const { engine } = scope;
  const actor = actorOf(scope);
  await new Invitations(engine.kv, () => engine.clock.now()).revoke(actor.organizationId, req.params.invitation_id, actor);
  return { status: 204 };
});
