import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { AiKeyRoutes } from '../../../ai/key-routes.js';
import { body } from './shared.js';
import { adminCall, ownSecretKey } from './owned.js';

/** `routes`: the model route ids the key may call; null lifts the list (as `key routes --all`). */
const Routes = z.strictObject({ routes: z.nullable(z.array(z.string().check(z.maxLength(128))).check(z.maxLength(1000))) });

/** PUT /console/api/keys/{key_id}/routes: `{key_id, routes}`; another route then answers `403 route_forbidden` to the key. */
export const handler = httpHandler('console.keys.routes.update', async (req, { engine, principal }) => {
  const key = await ownSecretKey(engine, principal.organizationId, req.params.key_id);
  const { routes } = body(Routes, req);
  return { status: 200, body: await adminCall(() => new AiKeyRoutes(engine.kv, () => engine.clock.now()).set(key.id, routes), 'key_not_found') };
});
