/** The Data distribution's upload relay (lambdas/edge/upload-relay.ts) against a recording origin. */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CloudFrontRequest, CloudFrontRequestEvent, CloudFrontResultResponse } from 'aws-lambda';
import { handler } from '../../lambdas/edge/upload-relay.js';
import { LAMBDA_MAX_BODY_BYTES } from '../../lambdas/http/event.js';

let origin: Server;
let port: number;
const seen: { method?: string; url?: string; headers: IncomingMessage['headers']; bodyBytes: number }[] = [];

beforeAll(async () => {
  origin = createServer((req, res) => {
    let bodyBytes = 0;
    req.on('data', (c: Buffer) => (bodyBytes += c.length));
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, bodyBytes });
      res.writeHead(307, { location: 'https://bucket.s3.example/key?X-Amz-Signature=x', 'cache-control': 'no-store', 'x-request-id': 'req_1', connection: 'keep-alive' });
      res.end();
    });
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  port = (origin.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => origin.close(() => resolve())));

function event(request: Partial<CloudFrontRequest> & { headers: CloudFrontRequest['headers'] }, originPort = port): CloudFrontRequestEvent {
  const req = {
    clientIp: '203.0.113.1',
    method: 'PUT',
    uri: '/v1/databases/db/blobs/' + 'a'.repeat(64),
    querystring: '',
    origin: { custom: { domainName: '127.0.0.1', port: originPort, protocol: 'http', path: '', sslProtocols: [], readTimeout: 30, keepaliveTimeout: 5, customHeaders: {} } },
    ...request,
  } as CloudFrontRequest;
  return { Records: [{ cf: { config: { distributionDomainName: 'd.example', distributionId: 'D', eventType: 'origin-request', requestId: 'r' }, request: req } }] } as CloudFrontRequestEvent;
}
const h = (name: string, value: string) => ({ [name.toLowerCase()]: [{ key: name, value }] });

describe('the upload relay', () => {
  it('passes on what fits a function, and every other method, untouched', async () => {
    const small = event({ headers: { ...h('Content-Length', String(LAMBDA_MAX_BODY_BYTES)), ...h('Authorization', 'Bearer k') } });
    expect(await handler(small)).toBe(small.Records[0].cf.request);
    const get = event({ method: 'GET', headers: h('Content-Length', String(LAMBDA_MAX_BODY_BYTES + 1)) });
    expect(await handler(get)).toBe(get.Records[0].cf.request);
    const odd = event({ headers: h('Content-Length', '12e9') });
    expect(await handler(odd)).toBe(odd.Records[0].cf.request);
    expect(seen).toHaveLength(0);
  });

  it("asks the API with the headers only (Upload-Length, no body, the client's credential) and answers its answer", async () => {
    const size = LAMBDA_MAX_BODY_BYTES + 1;
    const big = event({
      querystring: 'x=1',
      headers: { ...h('Content-Length', String(size)), ...h('Authorization', 'Bearer sk_1'), ...h('Expect', '100-continue'), ...h('X-Operation-Id', 'op_1'), ...h('Host', 'd.example') },
    });
    const answer = (await handler(big)) as CloudFrontResultResponse;
    expect(seen.at(-1)).toMatchObject({ method: 'PUT', url: `/v1/databases/db/blobs/${'a'.repeat(64)}?x=1`, bodyBytes: 0 });
    const sent = seen.at(-1)!.headers;
    expect(sent['upload-length']).toBe(String(size));
    expect(sent.authorization).toBe('Bearer sk_1');
    expect(sent['x-operation-id']).toBe('op_1');
    expect(sent.expect).toBeUndefined();
    expect(sent['content-length'] ?? '0').toBe('0');
    expect(answer.status).toBe('307');
    expect(answer.headers!.location[0].value).toBe('https://bucket.s3.example/key?X-Amz-Signature=x');
    expect(answer.headers!['cache-control'][0].value).toBe('no-store');
    // CloudFront refuses read-only headers in a generated response.
    expect(answer.headers!.connection).toBeUndefined();
    expect(answer.headers!['content-length']).toBeUndefined();
  });

  it('answers 503 service_unavailable in the platform error shape when the API cannot be reached', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const answer = (await handler(event({ headers: h('Content-Length', String(LAMBDA_MAX_BODY_BYTES + 1)) }, deadPort))) as CloudFrontResultResponse;
    expect(answer.status).toBe('503');
    expect(JSON.parse(answer.body!).error.code).toBe('service_unavailable');
  });
});
