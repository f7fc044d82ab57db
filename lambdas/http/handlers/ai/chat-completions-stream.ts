/**
 * POST /v1/chat/completions behind a Lambda function URL in RESPONSE_STREAM mode (lib/ai-edge.ts,
 * docs/decisions/ai-streaming-aws.md): the same route function as behind API Gateway, its
 * server-sent events piped as they arrive. The AI distribution sends every method on this path here;
 * all but POST are the AI API's fallback's to answer, as behind API Gateway.
 */
import { routeById } from '../../routes.js';
import { streaming } from '../../response-streaming.js';
import { handler as chat } from './chat-completions.js';
import { handler as fallback } from './not-found.js';

const route = routeById('ai.chat.completions');

export const handler = streaming(chat, {
  accepts: (event) => event.requestContext.http.method === route.method && event.rawPath === route.path,
  otherwise: fallback,
});
