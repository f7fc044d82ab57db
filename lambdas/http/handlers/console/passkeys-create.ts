import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { Passkeys } from '../../../console/passkeys.js';
import { People } from '../../../console/people.js';
import { notSignedIn } from '../../middleware/console-session.js';
import { relyingParty } from './passkeys-relying-party.js';
import { body } from './shared.js';

const Register = z.strictObject({ response: z.unknown(), name: z.optional(z.nullable(z.string())) });

/** POST /console/api/passkeys `{response, name?}`: verifies the registration and adds the passkey (201). */
export const handler = httpHandler('console.passkeys.create', async (req, { engine, principal, session }) => {
  const now = () => engine.clock.now();
  const { response, name } = body(Register, req);
  const person = await new People(engine.kv, now).get(principal.person!.id);
  if (!person || !session) throw notSignedIn();
  const passkey = await new Passkeys(engine.kv, now).register(person, relyingParty(), session.hash, response, name);
  return { status: 201, body: passkey };
});
