import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { Invitations } from '../../../console/invitations.js';
import { sessionFor } from '../../../console/sign-in.js';
import { settings } from '../../../shared/settings.js';
import { body, sessionToken, signedIn } from './shared.js';

const Accept = z.strictObject({ token: z.string(), password: z.string() });

/** POST /console/api/invitation/accept `{token, password}`: the person is created and signed in at once (the token in the body: access logs record paths). */
export const handler = httpHandler('console.invitation.accept', async (req, scope) => {
  const { engine } = scope;
  const { token, password } = body(Accept, req);
  const person = await new Invitations(engine.kv, () => engine.clock.now()).accept(token, password);
  const session = await sessionFor(engine, person, sessionToken(req), settings().credentialCacheMs);
  return signedIn(scope, engine, person, session);
});
