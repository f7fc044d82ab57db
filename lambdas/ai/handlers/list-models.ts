import { httpHandler } from '../../http/handler.js';
import { ModelRoutes } from '../model-routes.js';

/** GET /v1/models (spec 4.2): the organization's routes as OpenAI-style model entries. */
export const handler = httpHandler('ai.models.list', async (_req, { engine, principal }) => {
  const routes = await new ModelRoutes(engine.kv, () => engine.clock.now()).list(principal.organizationId);
  return {
    status: 200,
    body: {
      object: 'list',
      data: routes.map((r) => ({ id: r.id, object: 'model', created: r.created, owned_by: r.owned_by, endpoint: r.endpoint })),
    },
  };
});
