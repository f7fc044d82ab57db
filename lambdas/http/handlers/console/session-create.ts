import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { signIn } from '../../../console/sign-in.js';
import { settings } from '../../../shared/settings.js';
import { body, sessionToken, signedIn, signInAddress } from './shared.js';

const SignIn = z.strictObject({ email: z.string(), password: z.string() });

/** POST /console/api/session `{email, password}`: signs in (a new session every time; the old one ends). */
export const handler = httpHandler('console.session.create', async (req, scope) => {
  const { engine } = scope;
  const { email, password } = body(SignIn, req);
  const { person, session } = await signIn(engine, { email, password, address: signInAddress(req, engine.name), previousToken: sessionToken(req) }, settings().credentialCacheMs);
  return signedIn(scope, engine, person, session);
});
