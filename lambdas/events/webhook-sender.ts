/**
 * One webhook POST, made safely (docs/events/webhook-destinations.md): the URL is checked again at
 * every delivery, its name resolved once, and the socket connects to that checked address only (the
 * request's `lookup` answers with it, so nothing resolves the name a second time: a rebinding DNS
 * answer cannot swap in a private address between check and connect). TLS still verifies the
 * certificate for the URL's name (SNI and Host are the name, not the address). Redirects are never
 * followed; the response body is neither kept nor logged.
 */
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { PlatformError } from '../shared/errors.js';
import { settings } from '../shared/settings.js';
import { checkWebhookUrl, resolveDestination, type LookupFn } from './webhook-url.js';

export type DeliveryError = 'webhook_timeout' | 'webhook_network' | 'url_destination_blocked' | `webhook_status_${number}`;

export type DeliveryOutcome = { ok: true; status: number } | { ok: false; error: DeliveryError; status?: number };

export interface WebhookPost {
  url: string;
  body: string | Uint8Array;
  /** Sent as given, except `host` and `content-length`, which come from the URL and the body. */
  headers: Record<string, string>;
  /** The whole exchange: resolution, connection, TLS, request and the response's headers (spec 8: 10 s). */
  timeoutMs?: number;
  /** Default: the EVENTS_ALLOW_LOOPBACK_WEBHOOKS setting. */
  allowLoopback?: boolean;
  /** Stand-in for dns.promises.lookup (tests). */
  lookup?: LookupFn;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
/** Read past the headers only to keep the socket reusable; a longer body costs its socket, not our time. */
export const MAX_DRAINED_BYTES = 64 * 1024;
/** Per origin: enough for a busy receiver; other receivers have their own sockets and never queue behind it. */
export const MAX_SOCKETS_PER_ORIGIN = 50;
/** How long the body may take after the headers: only to keep the socket reusable, so a receiver trickling it costs a socket, not the delivery's time. */
const DRAIN_GRACE_MS = 500;
/** An idle socket is closed before the common 5 s server keep-alive timeout, so we rarely write into one the receiver is closing. */
const IDLE_SOCKET_MS = 4_000;

/** One keep-alive pool per process (and per Lambda instance), shared by every delivery. */
let agents: { https: https.Agent; http: http.Agent } | undefined;
function pool() {
  const options = { keepAlive: true, maxSockets: MAX_SOCKETS_PER_ORIGIN, maxFreeSockets: MAX_SOCKETS_PER_ORIGIN, timeout: IDLE_SOCKET_MS, scheduling: 'lifo' as const };
  return (agents ??= { https: new https.Agent(options), http: new http.Agent(options) });
}

class Deadline extends Error {}

/** `promise`, or a Deadline error when `deadline` passes first (a DNS lookup cannot be cancelled, only outrun). */
function before<T>(promise: Promise<T>, deadline: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expiry = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Deadline()), Math.max(0, deadline - Date.now()));
  });
  return Promise.race([promise, expiry]).finally(() => clearTimeout(timer));
}

const statusOutcome = (status: number): DeliveryOutcome =>
  status >= 200 && status < 300 ? { ok: true, status } : { ok: false, error: `webhook_status_${status}`, status };

/** POSTs `body` to the webhook URL and says how it went; never throws for the receiver's doing. */
export async function postWebhook(post: WebhookPost): Promise<DeliveryOutcome> {
  const timeoutMs = post.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const allowLoopback = post.allowLoopback ?? settings().eventsAllowLoopbackWebhooks ?? false;
  const deadline = Date.now() + timeoutMs;

  let url: URL;
  let destination: { address: string; family: 4 | 6 };
  try {
    // The URL passed at creation, but the rules or the setting may have changed since.
    url = checkWebhookUrl(post.url, { allowLoopback });
    destination = await before(resolveDestination(url, { allowLoopback, lookup: post.lookup }), deadline);
  } catch (error) {
    if (error instanceof PlatformError) return { ok: false, error: 'url_destination_blocked' };
    if (error instanceof Deadline) return { ok: false, error: 'webhook_timeout' };
    return { ok: false, error: 'webhook_network' }; // the name does not resolve
  }

  const first = await send(url, destination, post, deadline);
  // A pooled socket the receiver closed while idle fails at once, before any answer: Node's advice
  // is to retry on a fresh socket. The receiver deduplicates by event id, as for any retry.
  if (first.retryable && Date.now() < deadline) return (await send(url, destination, post, deadline)).outcome;
  return first.outcome;
}

interface Attempt {
  outcome: DeliveryOutcome;
  /** Failed on a reused socket before any response. */
  retryable?: boolean;
}

function send(url: URL, destination: { address: string; family: 4 | 6 }, post: WebhookPost, deadline: number): Promise<Attempt> {
  const secure = url.protocol === 'https:';
  const bracketless = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const name = bracketless.replace(/\.$/, ''); // SNI and Host carry no trailing dot
  // The only answer the socket gets for the name: the address checked above (net.connect asks with
  // `all: true` when it may race families, without it otherwise).
  const lookup = ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address: destination.address, family: destination.family }]);
    else callback(null, destination.address, destination.family);
  }) as unknown as LookupFunction;

  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(post.headers)) {
    if (!['host', 'content-length'].includes(key.toLowerCase())) headers[key] = value;
  }
  headers['content-length'] = String(Buffer.byteLength(post.body));

  const options: https.RequestOptions = {
    method: 'POST',
    host: name,
    port: url.port === '' ? (secure ? 443 : 80) : Number(url.port),
    path: `${url.pathname}${url.search}`,
    headers,
    family: destination.family,
    lookup,
    agent: secure ? pool().https : pool().http,
    // Certificates are verified (the default) for the name; an address gets no SNI.
    ...(secure && isIP(name) === 0 ? { servername: name } : {}),
  };

  return new Promise<Attempt>((resolve) => {
    let settled = false;
    let status: number | undefined;
    const finish = (attempt: Attempt) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(attempt);
    };
    const request = (secure ? https : http).request(options);
    const expire = () => {
      // After the headers the answer is known: a body still trickling changes nothing.
      finish({ outcome: status === undefined ? { ok: false, error: 'webhook_timeout' } : statusOutcome(status) });
      request.destroy();
    };
    let timer = setTimeout(expire, Math.max(0, deadline - Date.now()));

    request.on('error', () => {
      if (status !== undefined) return finish({ outcome: statusOutcome(status) });
      finish({ outcome: { ok: false, error: 'webhook_network' }, retryable: request.reusedSocket });
    });
    request.on('response', (response) => {
      status = response.statusCode ?? 0;
      const outcome = statusOutcome(status);
      clearTimeout(timer);
      timer = setTimeout(expire, Math.max(0, Math.min(DRAIN_GRACE_MS, deadline - Date.now())));
      // A redirect is an answer like any other: its Location is never visited.
      let drained = 0;
      response.on('data', (chunk: Buffer) => {
        drained += chunk.length;
        if (drained > MAX_DRAINED_BYTES) {
          finish({ outcome });
          request.destroy(); // the socket goes rather than reading on
        }
      });
      // Drained to the end, the socket goes back to the pool before the next delivery asks for one.
      response.on('end', () => finish({ outcome }));
      response.on('error', () => finish({ outcome }));
      response.on('close', () => finish({ outcome }));
    });
    request.end(post.body);
  });
}
