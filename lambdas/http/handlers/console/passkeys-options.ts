import { httpHandler } from '../../handler.js';
import { Passkeys } from '../../../console/passkeys.js';
import { People } from '../../../console/people.js';
import { notSignedIn } from '../../middleware/console-session.js';
import { relyingParty } from './passkeys-relying-party.js';

/** POST /console/api/passkeys/options: the options for navigator.credentials.create(), a challenge bound to this session. */
export const handler = httpHandler('console.passkeys.options', async (_req, { engine, principal, session }) => {
  const now = () => engine.clock.now();
  const person = await new People(engine.kv, now).get(principal.person!.id);
  if (!person || !session) throw notSignedIn();
  return { status: 200, body: await new Passkeys(engine.kv, now).registrationOptions(person, relyingParty(), session.hash) };
});
