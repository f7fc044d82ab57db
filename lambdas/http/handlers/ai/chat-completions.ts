import { idempotentHandler } from '../../idempotent.js';
import { heldEventStream } from '../../held-stream.js';
import { ModelRoutes } from '../../../ai/model-routes.js';
import { AiOrgSettings } from '../../../ai/org-settings.js';
import { outputCeiling, parseChatRequest, resolveRoute, upstreamChatBody } from '../../../ai/chat.js';
import { chatCompletion, chatStream, withUsageWrites } from '../../../ai/gateway.js';
import { DEFAULT_MAX_OUTPUT_TOKENS, estimateChat } from '../../../ai/estimate.js';
import { AI_OPERATIONS, aiOperation } from '../../../ai/operations.js';
import { PlatformError } from '../../../shared/errors.js';

const MID_STREAM = { error: () => new PlatformError('upstream_error', "The model route's upstream failed mid-stream."), what: 'chat stream' };

/**
 * POST /v1/chat/completions (spec 4.3; docs/ai/chat.md). A streamed answer is server-sent events
 * (http/sse.ts) in OpenAI's chunk format; a client that leaves aborts the upstream call. Streamed
 * replies are never kept for replay.
 */
export const handler = idempotentHandler('ai.chat.completions', AI_OPERATIONS, async (req, { engine, principal, operation, onClientGone, logIds }) => {
  const org = principal.organizationId;
  const now = () => engine.clock.now();
  const [aiSettings, routes] = await Promise.all([new AiOrgSettings(engine.kv, now).get(org), new ModelRoutes(engine.kv, now).list(org)]);
  const request = parseChatRequest(req.json, aiSettings.granted_fields);
  const route = await resolveRoute(engine, principal, routes, request.model, '/v1/chat/completions');
  const body = await upstreamChatBody(engine, org, route, request);
  // Each of the `n` choices may reach the ceiling.
  const estimate = estimateChat(request.messages, (outputCeiling(route, request) ?? DEFAULT_MAX_OUTPUT_TOKENS) * (request.n ?? 1), [request.tools, request.response_format]);
  const scope = { engine, principal };
  const call = aiOperation(engine, principal, route);
  if (!request.stream) return withUsageWrites(scope, (calls) => operation.answer(call, () => chatCompletion(calls, route, body, estimate)));

  // Streamed: the id is held while the stream runs (a second call is 409), then let go: nothing is kept.
  // An id whose non-streamed answer is kept replays that answer, as JSON (docs/ai/chat.md).
  return heldEventStream(operation, call, onClientGone, (signal) => chatStream({ ...scope, signal }, route, body, estimate, request.stream_options?.include_usage === true), MID_STREAM, logIds);
});
