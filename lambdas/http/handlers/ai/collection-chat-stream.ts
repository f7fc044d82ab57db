/**
 * POST /v1/collections/{id}/chat behind a Lambda function URL in RESPONSE_STREAM mode (lib/ai-edge.ts,
 * docs/decisions/ai-streaming-aws.md), as the chat route's streaming entry. A function URL's event
 * carries no path parameters: the route table's matcher reads `{id}` from the path, as API Gateway
 * would. Any other request on the distribution's path pattern is the AI API's fallback's to answer.
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { Router } from '../../router.js';
import { routeById } from '../../routes.js';
import { streaming } from '../../response-streaming.js';
import { handler as chat } from './collection-chat.js';
import { handler as fallback } from './not-found.js';

const route = routeById('ai.collections.chat');
const router = new Router('ai', [route, routeById('ai.fallback')]);
const matched = (event: APIGatewayProxyEventV2) => router.match(event.requestContext.http.method, event.rawPath);

/** Whether the event is this route's (its method, its path shape). */
export const accepts = (event: APIGatewayProxyEventV2) => matched(event).route === route;
/** The event with the path parameters API Gateway would have given it. */
export const withPathParameters = (event: APIGatewayProxyEventV2): APIGatewayProxyEventV2 => ({ ...event, pathParameters: matched(event).params });

export const handler = streaming((event, context) => chat(withPathParameters(event), context), { accepts, otherwise: fallback });
