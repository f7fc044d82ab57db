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

/** Where a URL's requests go, parsed once per URL (a URL object per request costs more than the request). */
interface Target {
  client: typeof http | typeof https;
  agent: http.Agent;
  options: http.RequestOptions;
}
const targets = new Map<string, Target | Error>();
const MAX_TARGETS = 1024;

function targetOf(url: string): Target | Error {
  let target = targets.get(url);
  if (target) return target;
  const parsed = new URL(url);
  const agent = agents[parsed.protocol as keyof typeof agents];
  target = agent
    ? {
        client: parsed.protocol === 'https:' ? https : http,
        agent,
        // The bracketed IPv6 host as node:http wants it: without brackets.
        options: { protocol: parsed.protocol, hostname: parsed.hostname.replace(/^\[(.*)\]$/, '$1'), port: parsed.port || undefined, path: `${parsed.pathname}${parsed.search}`, auth: parsed.username ? `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}` : undefined },
      }
    : new Error(`unsupported protocol ${parsed.protocol}`);
  if (targets.size >= MAX_TARGETS) targets.clear();
  targets.set(url, target);
  return target;
}

/**
 * POSTs `body` with `headers` (given its content-length: pass an object of this call's own); resolves
 * once the status line and headers arrived. Network failures and aborts reject as node:http reports them.
 */
export function post(url: string, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<UpstreamResponse> {
  return new Promise((resolve, reject) => {
    const target = targetOf(url);
    if (target instanceof Error) return reject(target);
    headers['content-length'] = String(Buffer.byteLength(body));
    const req = target.client.request({ ...target.options, method: 'POST', agent: target.agent, signal, headers }, (res) => {
      resolve({ status: res.statusCode ?? 0, body: res });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The whole body as text (an aborted or broken body rejects). Events, not an async iterator: cheaper per call. */
export function readText(body: Readable): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    body.on('data', (chunk: Buffer | string) => chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    body.on('end', () => resolve(chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8')));
    body.on('error', reject);
    // An aborted response ends without 'end': 'close' before it is a failure.
    body.on('close', () => {
      if (!body.readableEnded) reject(new Error('the answer was cut off'));
    });
  });
}

/** Reads and drops an error answer's body, so the connection can be reused. */
export function discard(body: Readable): void {
  body.resume();
  body.on('error', () => undefined);
}
