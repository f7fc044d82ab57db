/**
 * A CloudFront distribution in front of an origin, as far as an origin-request Lambda@Edge function
 * sees it: each request's headers become a CloudFront origin-request event (no body: the function is
 * not given it), the function runs, and its answer goes back to the client without a byte of the body
 * read, or, when it returns the request, the request goes on to the origin with its body.
 * A client that sent `Expect: 100-continue` gets the function's answer before sending anything.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CloudFrontHeaders, CloudFrontRequestEvent, CloudFrontRequestResult, CloudFrontResultResponse } from 'aws-lambda';
import { pipeline } from 'node:stream/promises';

export interface EdgeFront {
  url: string;
  /** How many requests the function answered itself (not forwarded). */
  answered: number;
  close(): Promise<void>;
}

type OriginRequestFunction = (event: CloudFrontRequestEvent) => Promise<CloudFrontRequestResult>;

export async function startEdgeFront(originUrl: string, fn: OriginRequestFunction): Promise<EdgeFront> {
  const origin = new URL(originUrl);
  const front: EdgeFront = { url: '', answered: 0, close: async () => {} };

  async function handle(req: IncomingMessage, res: ServerResponse, continueIfForwarded: boolean) {
    const [uri, querystring = ''] = (req.url ?? '/').split(/\?(.*)/s);
    const headers: CloudFrontHeaders = {};
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const key = req.rawHeaders[i];
      (headers[key.toLowerCase()] ??= []).push({ key, value: req.rawHeaders[i + 1] });
    }
    const request = {
      clientIp: req.socket.remoteAddress ?? '127.0.0.1',
      method: req.method ?? 'GET',
      uri,
      querystring,
      headers,
      origin: { custom: { domainName: origin.hostname, port: Number(origin.port), protocol: origin.protocol.slice(0, -1) as 'http' | 'https', path: '', sslProtocols: [], readTimeout: 30, keepaliveTimeout: 5, customHeaders: {} } },
    };
    const event = { Records: [{ cf: { config: { distributionDomainName: 'edge.test', distributionId: 'EDGE', eventType: 'origin-request', requestId: 'r' }, request } }] } as unknown as CloudFrontRequestEvent;
    const result = await fn(event);
    if (result && 'status' in result) {
      front.answered++;
      return answer(req, res, result as CloudFrontResultResponse);
    }
    if (continueIfForwarded) res.writeContinue();
    const { expect: _expect, ...sent } = req.headers;
    const upstream = httpRequest({ host: origin.hostname, port: origin.port, method: req.method, path: req.url, headers: { ...sent, host: origin.host } });
    const forwarded = new Promise<IncomingMessage>((resolve, reject) => upstream.on('response', resolve).on('error', reject));
    await pipeline(req, upstream);
    const back = await forwarded;
    res.writeHead(back.statusCode ?? 502, back.headers);
    await pipeline(back, res);
  }

  // A failure of the harness itself shows as a 502 with its message, as CloudFront answers an origin it cannot use.
  const failed = (res: ServerResponse) => (error: unknown) => {
    if (res.headersSent) return void res.destroy();
    res.writeHead(502, { 'content-type': 'text/plain', connection: 'close' });
    res.end(String(error));
  };
  const server = createServer((req, res) => void handle(req, res, false).catch(failed(res)));
  server.on('checkContinue', (req, res) => void handle(req, res, true).catch(failed(res)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  front.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  front.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return front;
}

function answer(req: IncomingMessage, res: ServerResponse, result: CloudFrontResultResponse) {
  const headers: Record<string, string[]> = {};
  for (const values of Object.values(result.headers ?? {})) for (const { key, value } of values) (headers[key!] ??= []).push(value);
  // The body the client may still be sending is dropped with the connection.
  if (!req.complete) headers.connection = ['close'];
  res.writeHead(Number(result.status), headers);
  res.end(result.body ?? '');
  if (!req.complete) req.resume();
}
