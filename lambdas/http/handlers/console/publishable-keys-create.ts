import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { PublishableKeys } from '../../../auth/publishable-keys.js';
import { body } from './shared.js';
import { originsCall, ownApplication } from './owned.js';

const Create = z.strictObject({ application_id: z.string(), origins: z.array(z.string().check(z.maxLength(2048))).check(z.maxLength(1000)) });

/** POST /console/api/publishable-keys `{application_id, origins}` → 201 `{id, key, origins}`: the `apb_…` key works only from those origins. */
export const handler = httpHandler('console.publishable-keys.create', async (req, { engine, principal }) => {
  const input = body(Create, req);
  const app = await ownApplication(engine, principal.organizationId, input.application_id);
  return { status: 201, body: await originsCall(new PublishableKeys(engine.kv, () => engine.clock.now()).create(app.id, input.origins)) };
});
