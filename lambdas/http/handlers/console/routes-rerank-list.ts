import { httpHandler } from '../../handler.js';
import { RerankProfiles } from '../../../vector/rerank-profiles.js';

/** GET /console/api/rerank-profiles: `{data: [profile, …]}` as `rerank-profile list` shows them (key names, never keys). */
export const handler = httpHandler('console.rerank-profiles.list', async (_req, { engine, principal }) => ({
  status: 200,
  body: { data: await new RerankProfiles(engine.kv, () => engine.clock.now()).list(principal.organizationId) },
}));
