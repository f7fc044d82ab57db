import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { PublishableKeys } from '../../../auth/publishable-keys.js';
import { body } from './shared.js';
import { originsCall, ownPublishableKey } from './owned.js';

const Origins = z.strictObject({ origins: z.array(z.string().check(z.maxLength(2048))).check(z.maxLength(1000)) });

/** PUT /console/api/publishable-keys/{key_id}/origins `{origins}`: the whole new list (1 to 50), applied within CREDENTIAL_CACHE_MS. */
export const handler = httpHandler('console.publishable-keys.origins', async (req, { engine, principal }) => {
  const key = await ownPublishableKey(engine, principal.organizationId, req.params.key_id);
  const { origins } = body(Origins, req);
  return { status: 200, body: await originsCall(new PublishableKeys(engine.kv, () => engine.clock.now()).setOrigins(key.id, origins)) };
});
