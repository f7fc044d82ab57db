import { httpHandler } from '../../handler.js';
import { RerankProfiles } from '../../../vector/rerank-profiles.js';
import { adminCall } from './owned.js';

/** DELETE /console/api/rerank-profiles/{profile_id}: `{id, deleted: true}`; a query naming it then answers `400 invalid_field`. */
export const handler = httpHandler('console.rerank-profiles.delete', async (req, { engine, principal }) => ({
  status: 200,
  body: await adminCall(() => new RerankProfiles(engine.kv, () => engine.clock.now()).delete(principal.organizationId, req.params.profile_id)),
}));
