import { httpHandler } from '../../handler.js';
import { ModelRoutes } from '../../../ai/model-routes.js';
import { PlatformError } from '../../../shared/errors.js';
import { adminCall } from './owned.js';

/**
 * POST /console/api/routes/{route_id}/default: makes the route its endpoint's default (the others of
 * the endpoint lose the flag in the same write), the route otherwise unchanged, as `route set --default`.
 */
export const handler = httpHandler('console.routes.default', async (req, { engine, principal }) => {
  const routes = new ModelRoutes(engine.kv, () => engine.clock.now());
  const route = (await routes.list(principal.organizationId)).find((r) => r.id === req.params.route_id);
  if (!route) throw new PlatformError('not_found', `No model route "${req.params.route_id}" in this organization.`, 'route_id');
  const given = <T>(v: T | null): T | undefined => (v === null ? undefined : v);
  const set = await adminCall(() =>
    routes.set(principal.organizationId, {
      id: route.id,
      endpoint: route.endpoint,
      provider: route.provider,
      base_url: given(route.base_url),
      upstream_model: given(route.upstream_model),
      default: true,
      max_tokens: given(route.max_tokens),
      tools: route.tools,
      timeout_ms: given(route.timeout_ms),
      tiers: given(route.tiers),
      price_in_per_mtok: given(route.price_in_per_mtok),
      price_out_per_mtok: given(route.price_out_per_mtok),
      price_per_minute: given(route.price_per_minute),
      api_key_env: given(route.api_key_env),
      max_answer_bytes: given(route.max_answer_bytes ?? null),
      max_event_bytes: given(route.max_event_bytes ?? null),
    }),
  );
  return { status: 200, body: set };
});
