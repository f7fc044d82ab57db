import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { RerankProfiles } from '../../../vector/rerank-profiles.js';
import { body, checkUpstreamDestination, keptUpstreamKey } from './shared.js';
import { adminCall } from './owned.js';

const text = z.optional(z.nullable(z.string().check(z.maxLength(2048))));
const Profile = z.strictObject({ provider: z.string().check(z.maxLength(64)), base_url: text, model: text, api_key_env: text, timeout_ms: z.optional(z.nullable(z.number())) });
const given = <T>(v: T | null | undefined): T | undefined => (v === null ? undefined : v);

/** PUT /console/api/rerank-profiles/{profile_id}: creates or replaces the profile, checked as `rerank-profile set` checks it (`400 invalid_body` naming the field). */
export const handler = httpHandler('console.rerank-profiles.put', async (req, { engine, principal }) => {
  const input = body(Profile, req);
  const profiles = new RerankProfiles(engine.kv, () => engine.clock.now());
  const current = (await profiles.list(principal.organizationId)).find((p) => p.id === req.params.profile_id);
  const apiKeyEnv = keptUpstreamKey(current, input);
  await checkUpstreamDestination(current, input);
  const profile = await adminCall(() =>
    profiles.set(principal.organizationId, {
      id: req.params.profile_id,
      provider: input.provider,
      base_url: given(input.base_url),
      model: given(input.model),
      api_key_env: apiKeyEnv,
      timeout_ms: given(input.timeout_ms),
    }),
  );
  return { status: 200, body: profile };
});
