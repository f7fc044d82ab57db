import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { ModelRoutes } from '../../../ai/model-routes.js';
import { AiOrgSettings } from '../../../ai/org-settings.js';
import { outputCeiling, parseChatRequest, resolveRoute, upstreamChatBody } from '../../../ai/chat.js';
import { parseEmbeddingsRequest, shapeEmbeddings } from '../../../ai/embeddings.js';
import { chatCompletion, embeddings, withUsageWrites } from '../../../ai/gateway.js';
import { DEFAULT_MAX_OUTPUT_TOKENS, estimateChat, estimateEmbeddings } from '../../../ai/estimate.js';
import { PlatformError } from '../../../shared/errors.js';
import { body } from './shared.js';

const Try = z.strictObject({ input: z.string().check(z.minLength(1), z.maxLength(8000)) });

/**
 * POST /console/api/routes/{route_id}/try `{input}`: one real call through the gateway as the person
 * ("Try it"): a chat route gets `input` as one user message, an embeddings route embeds it. The same
 * parsing, route resolution, limits and usage record as POST /v1/chat/completions and /v1/embeddings
 * (the call is in the activity log as `ai.usage` with the person as actor, and counts against the
 * organization's limits and budget); never kept for replay (no operation id).
 */
export const handler = httpHandler('console.routes.try', async (req, { engine, principal }) => {
  const { input } = body(Try, req);
  const org = principal.organizationId;
  const now = () => engine.clock.now();
  const routes = await new ModelRoutes(engine.kv, now).list(org);
  const named = routes.find((r) => r.id === req.params.route_id);
  if (!named) throw new PlatformError('not_found', `No model route "${req.params.route_id}" in this organization.`, 'route_id');
  const scope = { engine, principal };
  if (named.endpoint === '/v1/chat/completions') {
    const request = parseChatRequest({ model: named.id, messages: [{ role: 'user', content: input }] }, (await new AiOrgSettings(engine.kv, now).get(org)).granted_fields);
    const route = await resolveRoute(engine, principal, routes, request.model, '/v1/chat/completions');
    const upstream = await upstreamChatBody(engine, org, route, request);
    const estimate = estimateChat(request.messages, outputCeiling(route, request) ?? DEFAULT_MAX_OUTPUT_TOKENS);
    return { status: 200, body: await withUsageWrites(scope, (calls) => chatCompletion(calls, route, upstream, estimate)) };
  }
  if (named.endpoint === '/v1/embeddings') {
    const request = parseEmbeddingsRequest({ model: named.id, input });
    const route = await resolveRoute(engine, principal, routes, request.model, '/v1/embeddings');
    const list = await withUsageWrites(scope, (calls) => embeddings(calls, route, { input: request.inputs, encoding_format: 'float' }, estimateEmbeddings(request.inputs)));
    return { status: 200, body: shapeEmbeddings(list, request.inputs.length, 'float') };
  }
  throw new PlatformError('invalid_body', `"Try it" calls chat and embeddings routes; ${named.endpoint} routes are called through the AI API.`, 'route_id');
});
