import { httpHandler } from '../../handler.js';
import { ModelRoutes } from '../../../ai/model-routes.js';

/** GET /console/api/routes: `{data: [route, …]}` as `route list` shows them (upstream key names, never keys). */
export const handler = httpHandler('console.routes.list', async (_req, { engine, principal }) => ({
  status: 200,
  body: { data: await new ModelRoutes(engine.kv, () => engine.clock.now()).list(principal.organizationId) },
}));
