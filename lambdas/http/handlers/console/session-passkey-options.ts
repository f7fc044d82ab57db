import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { Passkeys } from '../../../console/passkeys.js';
import { relyingParty } from './passkeys-relying-party.js';
import { body, signInAddress } from './shared.js';

const Options = z.strictObject({ email: z.optional(z.nullable(z.string())) });

/** POST /console/api/session/passkey/options `{email?}`: the options for navigator.credentials.get() (no session needed). */
export const handler = httpHandler('console.session.passkey.options', async (req, { engine }) => {
  const { email } = body(Options, req);
  return { status: 200, body: await new Passkeys(engine.kv, () => engine.clock.now()).signInOptions(relyingParty(), email, signInAddress(req, engine.name)) };
});
