import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { AiKeyLimits, budgetState, keyScope } from '../../../ai/limits.js';
import { body } from './shared.js';
import { adminCall, ownSecretKey } from './owned.js';

const limit = z.optional(z.nullable(z.number()));
/** null lifts a limit, a field left out keeps it (as `key limits --rpm none`). */
const Limits = z.strictObject({ rpm: limit, tpm: limit, concurrency: limit, budget_usd: limit });

/** PUT /console/api/keys/{key_id}/limits (admin): a secret key's own AI limits, on top of its organization's; `{key_id, limits, budget}`. */
export const handler = httpHandler('console.keys.limits.update', async (req, { engine, principal }) => {
  const key = await ownSecretKey(engine, principal.organizationId, req.params.key_id);
  const limits = Object.fromEntries(Object.entries(body(Limits, req)).filter(([, v]) => v !== undefined));
  const set = await adminCall(() => new AiKeyLimits(engine.kv, () => engine.clock.now()).set(key.id, limits), 'key_not_found');
  return { status: 200, body: { ...set, budget: await budgetState(engine.kv, keyScope(key.id), engine.clock.now()) } };
});
