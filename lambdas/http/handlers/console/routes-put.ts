import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { ModelRoutes } from '../../../ai/model-routes.js';
import { PlatformError } from '../../../shared/errors.js';
import { body, checkUpstreamDestination, keptUpstreamKey } from './shared.js';
import { adminCall } from './owned.js';

const text = z.optional(z.string().check(z.maxLength(2048)));
const num = z.optional(z.nullable(z.number()));
/** The route as `route set` takes it; `model` and `upstream_model` name the same field. A price of null is no price. */
const Route = z.strictObject({
  endpoint: z.string().check(z.maxLength(64)),
  provider: z.string().check(z.maxLength(64)),
  base_url: text,
  model: text,
  upstream_model: text,
  default: z.optional(z.boolean()),
  max_tokens: num,
  tools: z.optional(z.boolean()),
  timeout_ms: num,
  tiers: z.optional(z.nullable(z.array(z.string().check(z.maxLength(128))).check(z.maxLength(100)))),
  price_in_per_mtok: num,
  price_out_per_mtok: num,
  price_per_minute: num,
  api_key_env: z.optional(z.nullable(z.string().check(z.maxLength(256)))),
  max_answer_bytes: num,
  max_event_bytes: num,
  force: z.optional(z.boolean()),
});

const given = <T>(v: T | null | undefined): T | undefined => (v === null ? undefined : v);

/**
 * PUT /console/api/routes/{route_id}: creates or replaces the route (the whole route, as `route set`
 * writes it; `default: true` makes it its endpoint's default), checked by the same rules (`400
 * invalid_body` naming the field). Running servers see it within MODEL_ROUTES_CACHE_MS. A new or
 * changed base_url must be a public destination (`400 url_destination_blocked`); api_key_env left out
 * keeps the route's key while its provider and base_url stay (console-upstream-destinations.md).
 */
export const handler = httpHandler('console.routes.put', async (req, { engine, principal }) => {
  const input = body(Route, req);
  if (input.model !== undefined && input.upstream_model !== undefined && input.model !== input.upstream_model) {
    throw new PlatformError('invalid_body', 'Send model or upstream_model, not two different values.', 'model');
  }
  const routes = new ModelRoutes(engine.kv, () => engine.clock.now());
  const current = (await routes.list(principal.organizationId)).find((r) => r.id === req.params.route_id);
  const apiKeyEnv = keptUpstreamKey(current, input);
  await checkUpstreamDestination(current, input);
  const route = await adminCall(() =>
    routes.set(
      principal.organizationId,
      {
        id: req.params.route_id,
        endpoint: input.endpoint,
        provider: input.provider,
        base_url: input.base_url,
        upstream_model: input.upstream_model ?? input.model,
        default: input.default === true,
        max_tokens: given(input.max_tokens),
        tools: input.tools,
        timeout_ms: given(input.timeout_ms),
        tiers: given(input.tiers),
        price_in_per_mtok: given(input.price_in_per_mtok),
        price_out_per_mtok: given(input.price_out_per_mtok),
        price_per_minute: given(input.price_per_minute),
        api_key_env: apiKeyEnv,
        max_answer_bytes: given(input.max_answer_bytes),
        max_event_bytes: given(input.max_event_bytes),
      },
      { force: input.force === true },
    ),
  );
  return { status: 200, body: route };
});
