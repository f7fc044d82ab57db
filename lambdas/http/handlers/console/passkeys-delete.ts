import { httpHandler } from '../../handler.js';
import { Passkeys } from '../../../console/passkeys.js';

/** DELETE /console/api/passkeys/{passkey_id}: removes one of the signed-in person's passkeys (404 passkey_not_found otherwise). */
export const handler = httpHandler('console.passkeys.delete', async (req, { engine, principal }) => {
  await new Passkeys(engine.kv, () => engine.clock.now()).remove(principal.person!.id, req.params.passkey_id);
  return { status: 204 };
});
