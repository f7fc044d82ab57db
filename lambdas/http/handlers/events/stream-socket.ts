/**
 * The Events WebSocket API's function in AWS: $connect, $default and $disconnect of the stream
 * (docs/decisions/stream-url-aws.md).
 *
 * $connect runs the very route the local server runs for a stream handshake (GET .../stream, through
 * the whole chain: credential, a publishable key's origin, permission, workspace, rate limit, activity)
 * on an event made from the handshake. The route's path reaches API Gateway in `x-stream-path`: the
 * CloudFront distribution in front of the Events API moves the spec's URL there, as API Gateway routes
 * every WebSocket handshake to its stage path. An accepted handshake answers with the `service.v1`
 * subprotocol; a refused one with the route's status (API Gateway then refuses the upgrade).
 */
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { getEngine } from '../../../engine/index.js';
import type { StreamGrant } from '../../../events/stream.js';
import { releaseStreamSlot } from '../../../events/stream-slots.js';
import { closeRemoteStream, openRemoteStream, receiveRemoteFrame } from '../../../events/stream-remote.js';
import { inRequest, log } from '../../../shared/log.js';
import { Router } from '../../router.js';
import { ROUTES, STREAM_PATH_HEADER } from '../../routes.js';
import type { RouteResult } from '../../types.js';
import { bearerAuthorization, STREAM_SUBPROTOCOL } from '../../websocket.js';
import { handler as streamRoute } from './stream.js';

const STREAM_ROUTE_ID = 'events.subscriptions.stream';

/** The fields of an API Gateway WebSocket event this function reads. */
export interface SocketEvent {
  requestContext: { routeKey: string; connectionId: string; requestId?: string; stage?: string; domainName?: string; identity?: { sourceIp?: string } };
  headers?: Record<string, string | undefined>;
  queryStringParameters?: Record<string, string | undefined> | null;
  body?: string | null;
  isBase64Encoded?: boolean;
}

export interface SocketResult {
  statusCode: number;
  headers?: Record<string, string>;
  body?: string;
}

const router = new Router('events', ROUTES);
const OK: SocketResult = { statusCode: 200 };

/** Every line logged while an event is handled names it (API Gateway's request id, else the invocation's). */
export function handler(event: SocketEvent, context: Context): Promise<SocketResult> {
  return inRequest({ request_id: event.requestContext.requestId || context?.awsRequestId }, () => handle(event, context));
}

async function handle(event: SocketEvent, context: Context): Promise<SocketResult> {
  const { routeKey, connectionId } = event.requestContext;
  if (routeKey === '$connect') return connect(event, context);
  try {
    const engine = await getEngine();
    if (routeKey === '$disconnect') await closeRemoteStream(engine, connectionId);
    // API Gateway closes a socket sending a binary frame itself (1003); a base64 body never reaches here as an ack.
    else if (event.isBase64Encoded) await Promise.all([closeRemoteStream(engine, connectionId), engine.connections.disconnect(connectionId)]);
    else await receiveRemoteFrame(engine, connectionId, event.body ?? '');
    return OK;
  } catch (error) {
    // Unacknowledged frames come again after their lease; a slot left behind expires with the connection.
    log.error('stream socket event failed', { routeKey, error: String((error as Error)?.stack ?? error) });
    return { statusCode: 500 };
  }
}

async function connect(event: SocketEvent, context: Context): Promise<SocketResult> {
  const { connectionId } = event.requestContext;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(event.headers ?? {})) if (value !== undefined) headers[name.toLowerCase()] = value;
  const path = headers[STREAM_PATH_HEADER] ?? '';
  const { route, params } = router.match('GET', path.split('?')[0]);
  if (route.id !== STREAM_ROUTE_ID) return { statusCode: 404 };
  const authorization = bearerAuthorization(headers);
  if (authorization) headers.authorization = authorization;

  let grant: StreamGrant | undefined;
  const offer = { connectionId, accept: (g: StreamGrant) => void (grant = g) };
  const request = {
    version: '2.0',
    routeKey: `GET ${route.path}`,
    rawPath: path,
    rawQueryString: '',
    headers,
    queryStringParameters: Object.fromEntries(Object.entries(event.queryStringParameters ?? {}).filter(([, v]) => v !== undefined)),
    pathParameters: params,
    isBase64Encoded: false,
    requestContext: {
      requestId: event.requestContext.requestId ?? connectionId,
      http: { method: 'GET', path, protocol: 'HTTP/1.1', sourceIp: event.requestContext.identity?.sourceIp ?? '', userAgent: headers['user-agent'] ?? '' },
    },
  } as unknown as APIGatewayProxyEventV2;
  const result: RouteResult = await streamRoute(request, { ...context, transport: { mode: 'buffered', upgrade: offer } });
  if (result.statusCode !== 101 || !grant) return { statusCode: result.statusCode ?? 500, headers: plain(result.headers), body: typeof result.body === 'string' ? result.body : undefined };

  const engine = await getEngine();
  try {
    await openRemoteStream(engine, grant);
  } catch (error) {
    log.error('stream connect failed', { error: String((error as Error)?.stack ?? error) });
    await releaseStreamSlot(engine, grant.slot);
    return { statusCode: 503 };
  }
  return { statusCode: 200, headers: { 'Sec-WebSocket-Protocol': STREAM_SUBPROTOCOL } };
}

const plain = (headers: RouteResult['headers']): Record<string, string> | undefined =>
  headers ? Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, String(v)])) : undefined;
