import { httpHandler } from '../../handler.js';
import { Passkeys } from '../../../console/passkeys.js';

/** GET /console/api/passkeys: the signed-in person's passkeys (never a public key or a counter). */
export const handler = httpHandler('console.passkeys.list', async (_req, { engine, principal }) => ({
  status: 200,
  body: { data: await new Passkeys(engine.kv, () => engine.clock.now()).list(principal.person!.id) },
}));
