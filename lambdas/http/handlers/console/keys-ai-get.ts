import { httpHandler } from '../../handler.js';
import { AiKeyLimits, budgetState, keyScope } from '../../../ai/limits.js';
import { AiKeyRoutes } from '../../../ai/key-routes.js';
import { ownSecretKey } from './owned.js';

/** GET /console/api/keys/{key_id}/ai: a secret key's own AI limits with its budget spent, and the model routes it may call (null: all), as `key list` shows them. */
export const handler = httpHandler('console.keys.ai.get', async (req, { engine, principal }) => {
  const key = await ownSecretKey(engine, principal.organizationId, req.params.key_id);
  const now = () => engine.clock.now();
  const [limits, routes, budget] = await Promise.all([new AiKeyLimits(engine.kv, now).get(key.id), new AiKeyRoutes(engine.kv, now).get(key.id), budgetState(engine.kv, keyScope(key.id), now())]);
  return { status: 200, body: { key_id: key.id, limits, budget, routes } };
});
