/**
 * POST /v1/responses behind a Lambda function URL in RESPONSE_STREAM mode (lib/ai-edge.ts,
 * docs/decisions/ai-streaming-aws.md), as chat's streaming entry: the same route function, its
 * server-sent events piped as they arrive. Every other method on this path is the AI API's fallback's.
 */
import { routeById } from '../../routes.js';
import { streaming } from '../../response-streaming.js';
import { handler as responses } from './openai-responses-create.js';
import { handler as fallback } from './not-found.js';

const route = routeById('ai.responses.create');

export const handler = streaming(responses, {
  accepts: (event) => event.requestContext.http.method === route.method && event.rawPath === route.path,
  otherwise: fallback,
});
