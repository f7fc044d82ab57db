/**
 * The HTTP client of the HTTP-speaking providers (openai-compatible, http): node:http(s) requests on
 * keep-alive agents, one per protocol, so connections to an upstream are reused. Not `fetch`: its
 * WHATWG streams cost more CPU per call than the rest of the gateway together (measured with
 * `npm run bench -- ai`; docs/benchmarks.md). Redirects are never followed (a 3xx is an error answer).
 */
import http from 'node:http';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { upstreamError } from '../upstream-errors.js';

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

/** Tries on pooled connections before a fresh one: each stale one found is dropped from the pool. */
const REUSED_TRIES = 3;

/**
 * POSTs `body` (text, bytes, or parts of bytes written in turn) with `headers` (given its content-length: pass an
 * object of this call's own); resolves once the status line and headers arrived. Network failures and
 * aborts reject as node:http reports them, except one: a pooled keep-alive connection the upstream
 * closed while it sat idle fails the request before any answer (ECONNRESET, EPIPE) and the request
 * is sent again, as Node's documentation advises (`request.reusedSocket`). The upstream closed that
 * connection without reading the request, so it was not processed; a fresh connection's failure is
 * never retried.
 */
export function post(url: string, headers: Record<string, string>, body: string | Uint8Array | Uint8Array[], signal: AbortSignal): Promise<UpstreamResponse> {
  const target = targetOf(url);
  if (target instanceof Error) return Promise.reject(target);
  // A body in parts (a multipart form around a file's bytes) is written part by part, never joined.
  const parts = Array.isArray(body) ? body : [body];
  headers['content-length'] = String(parts.reduce((n, part) => n + Buffer.byteLength(part), 0));
  const send = (triesLeft: number): Promise<UpstreamResponse> =>
    new Promise((resolve, reject) => {
      let answered = false;
      const req = target.client.request({ ...target.options, method: 'POST', agent: target.agent, signal, headers }, (res) => {
        answered = true;
        resolve({ status: res.statusCode ?? 0, body: res });
      });
      req.on('error', (error: NodeJS.ErrnoException) => {
        const stale = !answered && req.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE') && !signal.aborted;
        if (stale && triesLeft > 0) resolve(send(triesLeft - 1));
        else reject(error);
      });
      for (const part of parts.slice(0, -1)) req.write(part);
      req.end(parts.at(-1));
    });
  return send(REUSED_TRIES);
}

/**
 * Caps on what an upstream may send, when the route sets none: a JSON answer is read
 * whole before it is parsed, so its size is capped (`route set --max-answer-bytes`); a stream is passed
 * on as it arrives, but each of its lines (and each event's data) is held until its end, so a line is
 * capped (`route set --max-event-bytes`). Past either, the read stops (the connection is destroyed) and
 * the call answers 502 upstream_error.
 */
export const MAX_ANSWER_BYTES = 32 * 1024 * 1024;
export const MAX_EVENT_BYTES = 1024 * 1024;

/**
 * The whole body as text, at most `maxBytes` of it. Every failure of the body is a 502 upstream_error
 * (a declared or actual length past the cap, a body cut off or reset, text that cannot be decoded),
 * except when `signal` ended the call (the route's timeout, the client leaving): then the abort's own
 * error, which the gateway maps (gateway.ts, upstream-errors.ts). Events, not an async iterator:
 * cheaper per call. Never throws from a listener: a throw there would take the whole process down.
 */
export function readText(body: Readable, maxBytes: number, signal: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (error: unknown, detail: string) => {
      if (settled) return;
      settled = true;
      if (!body.destroyed) body.destroy();
      reject(signal.aborted ? error : upstreamError(detail));
    };
    const tooLarge = () => fail(undefined, `the answer is over ${maxBytes} bytes`);
    const declared = Number((body as IncomingMessage).headers?.['content-length']);
    if (declared > maxBytes) return tooLarge();
    const chunks: Buffer[] = [];
    let size = 0;
    body.on('data', (chunk: Buffer | string) => {
      if (settled) return;
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      size += bytes.length;
      if (size > maxBytes) return tooLarge();
      chunks.push(bytes);
    });
    body.on('end', () => {
      if (settled) return;
      settled = true;
      try {
        resolve(chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks, size).toString('utf8'));
      } catch {
        reject(upstreamError('the answer cannot be read as text'));
      }
    });
    body.on('error', (error) => fail(error, 'the answer was cut off'));
    // An aborted response ends without 'end': 'close' before it is a failure.
    body.on('close', () => {
      if (!body.readableEnded) fail(signal.reason ?? new Error('aborted'), 'the answer was cut off');
    });
  });
}

/** Past this much, an error answer's body is not read to its end: the connection is closed instead. */
const DISCARD_BYTES = 64 * 1024;

/** Reads and drops an error answer's body, so the connection can be reused (one that goes on and on is closed). */
export function discard(body: Readable): void {
  let size = 0;
  body.on('data', (chunk: Buffer | string) => {
    size += chunk.length;
    if (size > DISCARD_BYTES) body.destroy();
  });
  body.on('error', () => undefined);
}

/**
 * A 2xx answer's body as JSON, read within `maxBytes`; another status (its body dropped, never quoted:
 * it may echo the key) or a body that is not JSON is `upstream_error`.
 */
export async function jsonAnswer(res: UpstreamResponse, maxBytes: number, signal: AbortSignal): Promise<unknown> {
  if (res.status < 200 || res.status > 299) {
    discard(res.body);
    throw upstreamError(`status ${res.status}`);
  }
  const text = await readText(res.body, maxBytes, signal);
  try {
    return JSON.parse(text);
  } catch {
    throw upstreamError('the answer is not JSON');
  }
}
