/**
 * The HTTP client of the HTTP-speaking providers (openai-compatible, http): node:http(s) requests on
 * keep-alive agents, one per protocol, so connections to an upstream are reused. Not `fetch`: its
 * WHATWG streams cost more CPU per call than the rest of the gateway together (measured with
 * `npm run bench -- ai`; docs/benchmarks.md). Redirects are never followed (a 3xx is an error answer).
 */
import http from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';

const agents = {
  'http:': new http.Agent({ keepAlive: true, maxSockets: 256, scheduling: 'lifo' }),
  'https:': new https.Agent({ keepAlive: true, maxSockets: 256, scheduling: 'lifo' }),
};

export interface UpstreamResponse {
  status: number;
  /** The body as it arrives; destroy it to give up on the rest (the connection is then closed). */
  body: Readable;
}

/** POSTs `body`; resolves once the status line and headers arrived. Network failures and aborts reject as node:http reports them. */
export function post(url: string, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<UpstreamResponse> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const client = target.protocol === 'https:' ? https : http;
    const agent = agents[target.protocol as keyof typeof agents];
    if (!agent) return reject(new Error(`unsupported protocol ${target.protocol}`));
    const req = client.request(target, { method: 'POST', agent, signal, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
      resolve({ status: res.statusCode ?? 0, body: res });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The whole body as text (an aborted or broken body rejects). */
export async function readText(body: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/** Reads and drops an error answer's body, so the connection can be reused. */
export function discard(body: Readable): void {
  body.resume();
  body.on('error', () => undefined);
}
