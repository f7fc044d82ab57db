/**
 * An HTTP front that calls the route functions as Lambda behind API Gateway does, size limits included,
 * for tests of what a deployed stack accepts:
 * - API Gateway reads the whole body before any function runs and refuses one over 10 MB (413);
 * - Lambda takes an invocation of at most 6 MB (the event, base64 body included) and answers at most
 *   6 MB: past either, API Gateway answers 413 or 500 itself;
 * - the function gets no transport (`buffered` mode): answers travel whole in the result.
 * Put test/helpers/cloudfront-edge.ts in front of it for the Data distribution and its upload relay.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import type { RouteFunction } from '../../lambdas/http/handler.js';
import { ROUTES } from '../../lambdas/http/routes.js';
import { Router } from '../../lambdas/http/router.js';
import { GATEWAY_MAX_BODY_BYTES, parseTarget, toEvent } from '../../lambdas/local/http-server.js';
import type { Api } from '../../lambdas/shared/api.js';
import { lambdaContext } from './events.js';

/** Lambda's synchronous invocation payload, request and response alike. */
export const LAMBDA_MAX_PAYLOAD_BYTES = 6 * 1024 * 1024;

export interface LambdaFront {
  url: string;
  /** Every invocation's event size in bytes, in order (a test can show no body went through a function). */
  invocations: { route: string; eventBytes: number }[];
  close(): Promise<void>;
}

const LAMBDAS = join(import.meta.dirname, '..', '..', 'lambdas');

export async function startLambdaFront(api: Api): Promise<LambdaFront> {
  const router = new Router(api, ROUTES);
  const functions = new Map<string, RouteFunction>();
  for (const route of ROUTES.filter((r) => r.api === api)) {
    functions.set(route.id, (await import(pathToFileURL(join(LAMBDAS, `${route.handler}.ts`)).href)).handler);
  }
  const invocations: LambdaFront['invocations'] = [];

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = parseTarget(req.url ?? '/');
    const { route, params } = router.match(req.method ?? 'GET', url.pathname);
    const invoke = async (body: Buffer) => {
      const event = toEvent(api, req, url, route, params, body);
      const eventBytes = Buffer.byteLength(JSON.stringify(event));
      invocations.push({ route: route.id, eventBytes });
      if (eventBytes > LAMBDA_MAX_PAYLOAD_BYTES) return gateway(res, 413, 'Request Entity Too Large');
      const result = await functions.get(route.id)!(event, lambdaContext());
      if (Buffer.byteLength(JSON.stringify(result)) > LAMBDA_MAX_PAYLOAD_BYTES) return gateway(res, 500, 'Internal Server Error');
      res.writeHead(result.statusCode ?? 200, result.headers as Record<string, string>);
      res.end(result.body ? Buffer.from(result.body, result.isBase64Encoded ? 'base64' : 'utf8') : undefined);
    };

    const body = await readAtMost(req, GATEWAY_MAX_BODY_BYTES);
    if (!body) return gateway(res, 413, 'Request Entity Too Large');
    return invoke(body);
  }

  const server = createServer((req, res) => void handle(req, res).catch((error) => gateway(res, 500, String(error))));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    invocations,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** API Gateway's own answers carry `{"message": ...}`, not the platform's error shape. */
function gateway(res: ServerResponse, status: number, message: string) {
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { 'content-type': 'application/json', connection: 'close' });
  res.end(JSON.stringify({ message }));
}

/** The whole body, or undefined past `max` bytes (the rest is left unread). */
async function readAtMost(req: IncomingMessage, max: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > max) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
