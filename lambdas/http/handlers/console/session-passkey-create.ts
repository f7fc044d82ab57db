import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { signInWithPasskey } from '../../../console/passkeys.js';
import { settings } from '../../../shared/settings.js';
import { relyingParty } from './passkeys-relying-party.js';
import { body, sessionToken, signedIn, signInAddress } from './shared.js';

const SignIn = z.strictObject({ response: z.unknown() });

/** POST /console/api/session/passkey `{response}`: signs in with a passkey (a new session, as the password's sign-in). */
export const handler = httpHandler('console.session.passkey.create', async (req, scope) => {
  const { engine } = scope;
  const { response } = body(SignIn, req);
  const { person, session } = await signInWithPasskey(engine, { rp: relyingParty(), response, address: signInAddress(req, engine.name), previousToken: sessionToken(req) }, settings().credentialCacheMs);
  return signedIn(scope, engine, person, session);
});
