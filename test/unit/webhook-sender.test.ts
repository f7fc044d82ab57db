/**
 * The webhook sender (lambdas/events/webhook-sender.ts) against real receivers on 127.0.0.1
 * (node:http, and node:https for TLS), with the loopback setting on where a receiver must be
 * reached and off to prove nothing is: outcomes per status, redirects not followed, the timeout,
 * network failures, the request exactly as sent, keep-alive reuse, and one resolution per delivery
 * with the connection made to the address that was checked.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { EventEmitter } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LookupFn } from '../../lambdas/events/webhook-url.js';

// https.request is wrapped (calling the real one by default) so that one test can see the options
// a delivery to a public address would connect with, without connecting anywhere.
vi.mock('node:https', async (importOriginal) => {
  const real = (await importOriginal<{ default: typeof import('node:https') }>()).default;
  const request = vi.fn((...args: Parameters<typeof real.request>) => real.request(...args));
  return { default: { ...real, request }, ...real, request };
});

const { postWebhook, MAX_DRAINED_BYTES } = await import('../../lambdas/events/webhook-sender.js');

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  socket: Socket;
}

/** A receiver on 127.0.0.1: records every request and connection; `reply` answers (or not). */
async function receiver(reply: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_, res) => res.end('ok'), host = '127.0.0.1') {
  const requests: Received[] = [];
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks), socket: req.socket });
      reply(req, res);
    });
  });
  let connections = 0;
  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  const close = () => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  };
  open.push(close);
  return { port, url: `http://127.0.0.1:${port}`, requests, get connections() { return connections; }, close };
}

const open: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((close) => close()));
  vi.mocked(https.request).mockClear();
});

const ENVELOPE = JSON.stringify({ event_id: 'evt_01J0000000000000000000000', type: 'order.paid', data: { amount: 12.5, note: 'café ✓' } });
const HEADERS = {
  'content-type': 'application/json',
  'x-event-id': 'evt_01J0000000000000000000000',
  'x-event-type': 'order.paid',
  'x-event-timestamp': '1767225600',
  'x-event-signature': `v1=${'a'.repeat(64)},v1=${'b'.repeat(64)}`,
};

const post = (url: string, extra: Partial<Parameters<typeof postWebhook>[0]> = {}) =>
  postWebhook({ url, body: ENVELOPE, headers: HEADERS, allowLoopback: true, timeoutMs: 2000, ...extra });

/** A lookup answering `answers[i]` on its i-th call (the last one after that), counting calls. */
function countingLookup(...answers: string[][]): LookupFn & { calls: number } {
  const fn = Object.assign(
    async () => {
      const list = answers[Math.min(fn.calls, answers.length - 1)];
      fn.calls += 1;
      return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    },
    { calls: 0 },
  );
  return fn;
}

describe('postWebhook outcomes', () => {
  it('a 2xx is ok, with its status', async () => {
    const ok = await receiver((_, res) => res.end('thanks'));
    expect(await post(`${ok.url}/hook`)).toEqual({ ok: true, status: 200 });
    const created = await receiver((_, res) => {
      res.statusCode = 204;
      res.end();
    });
    expect(await post(`${created.url}/hook`)).toEqual({ ok: true, status: 204 });
  });

  it('a 500 is webhook_status_500, a 404 webhook_status_404, a 429 webhook_status_429', async () => {
    for (const status of [500, 404, 429]) {
      const r = await receiver((_, res) => {
        res.statusCode = status;
        res.end('{"error":"secret detail"}');
      });
      const outcome = await post(r.url);
      expect(outcome).toEqual({ ok: false, error: `webhook_status_${status}`, status });
      expect(JSON.stringify(outcome)).not.toContain('secret detail'); // the body is never returned
    }
  });

  it('a 302 is webhook_status_302 and its Location receives nothing', async () => {
    const target = await receiver();
    const redirecting = await receiver((_, res) => {
      res.writeHead(302, { location: `${target.url}/elsewhere` });
      res.end();
    });
    expect(await post(`${redirecting.url}/hook`)).toEqual({ ok: false, error: 'webhook_status_302', status: 302 });
    for (const status of [301, 307, 308]) {
      const r = await receiver((_, res) => {
        res.writeHead(status, { location: `${target.url}/elsewhere` });
        res.end();
      });
      expect(await post(r.url)).toEqual({ ok: false, error: `webhook_status_${status}`, status });
    }
    await sleep(50);
    expect(target.requests).toHaveLength(0);
    expect(target.connections).toBe(0);
  });

  it('a receiver that never answers is webhook_timeout once timeoutMs has passed, not before', async () => {
    let arrived!: () => void;
    const requestArrived = new Promise<void>((resolve) => (arrived = resolve));
    const silent = await receiver(() => arrived());
    // The sender's deadline runs on faked timers; sockets stay real, so the request still travels.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      let outcome: unknown;
      const posted = post(silent.url, { timeoutMs: 300 }).then((o) => (outcome = o));
      await requestArrived;
      vi.advanceTimersByTime(299);
      await new Promise((resolve) => setImmediate(resolve));
      expect(outcome).toBeUndefined();
      vi.advanceTimersByTime(1);
      await posted;
      expect(outcome).toEqual({ ok: false, error: 'webhook_timeout' });
      expect(silent.requests).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a receiver answering headers but never ending the body is ok without waiting for the body', async () => {
    const endless = await receiver((_, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('x'.repeat(1000)); // and never ends
    });
    const started = Date.now();
    expect(await post(endless.url, { timeoutMs: 5000 })).toEqual({ ok: true, status: 200 });
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('a huge body is read at most 64 KB before the socket is dropped', async () => {
    let written = 0;
    const huge = await receiver((_, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(16 * 1024, 120);
      const pump = () => {
        while (written < 50 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.on('close', () => res.removeAllListeners('drain'));
      pump();
    });
    const started = Date.now();
    expect(await post(huge.url)).toEqual({ ok: true, status: 200 });
    expect(Date.now() - started).toBeLessThan(1500);
    await sleep(50);
    // The socket was dropped: far less than the 50 MB on offer was taken (socket buffers aside).
    expect(written).toBeLessThan(16 * 1024 * 1024);
    expect(MAX_DRAINED_BYTES).toBe(64 * 1024);
  });

  it('a closed port is webhook_network', async () => {
    const r = await receiver();
    const { url } = r;
    await r.close();
    expect(await post(url)).toEqual({ ok: false, error: 'webhook_network' });
  });

  it('a receiver that drops the connection before answering is webhook_network', async () => {
    const rude = await receiver((req) => req.socket.destroy());
    expect(await post(rude.url)).toEqual({ ok: false, error: 'webhook_network' });
  });

  it('a name that does not resolve is webhook_network', async () => {
    const failing: LookupFn = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND hooks.example.com'), { code: 'ENOTFOUND' });
    };
    expect(await post('https://hooks.example.com/hook', { allowLoopback: false, lookup: failing })).toEqual({ ok: false, error: 'webhook_network' });
  });

  it('a resolution slower than the timeout is webhook_timeout', async () => {
    const slow: LookupFn = () => new Promise(() => {});
    expect(await post('https://hooks.example.com/hook', { allowLoopback: false, lookup: slow, timeoutMs: 100 })).toEqual({ ok: false, error: 'webhook_timeout' });
  });
});

describe('the request', () => {
  it('arrives with the headers and body exactly as sent, as a POST to the URL\'s path and query', async () => {
    const r = await receiver();
    expect(await post(`${r.url}/hooks/in?tenant=a&x=%20y`)).toEqual({ ok: true, status: 200 });
    const [got] = r.requests;
    expect(got.method).toBe('POST');
    expect(got.url).toBe('/hooks/in?tenant=a&x=%20y');
    expect(got.body.equals(Buffer.from(ENVELOPE, 'utf8'))).toBe(true);
    for (const [name, value] of Object.entries(HEADERS)) expect(got.headers[name]).toBe(value);
    expect(got.headers['content-length']).toBe(String(Buffer.byteLength(ENVELOPE)));
    expect(got.headers.host).toBe(`127.0.0.1:${r.port}`);
  });

  it('sets host and content-length itself, whatever the caller passes', async () => {
    const r = await receiver();
    await post(r.url, { headers: { ...HEADERS, Host: 'internal.example', 'Content-Length': '1' } });
    expect(r.requests[0].headers.host).toBe(`127.0.0.1:${r.port}`);
    expect(r.requests[0].body.toString('utf8')).toBe(ENVELOPE);
  });

  it('reuses one keep-alive connection for sequential deliveries to one receiver', async () => {
    const r = await receiver();
    for (let i = 0; i < 5; i += 1) expect(await post(`${r.url}/hook`)).toEqual({ ok: true, status: 200 });
    expect(r.requests).toHaveLength(5);
    expect(r.connections).toBe(1);
    expect(new Set(r.requests.map((q) => q.socket)).size).toBe(1);
  });

  it('keeps the connection after a non-2xx answer too', async () => {
    const r = await receiver((_, res) => {
      res.statusCode = 503;
      res.end('busy');
    });
    for (let i = 0; i < 3; i += 1) expect((await post(r.url)).ok).toBe(false);
    expect(r.connections).toBe(1);
  });

  it('does not make one receiver\'s deliveries wait on a slow one', async () => {
    const slow = await receiver(() => {}); // never answers
    const fast = await receiver();
    const stuck = Array.from({ length: 10 }, () => post(slow.url, { timeoutMs: 5000 }));
    await sleep(20);
    const started = Date.now();
    const quick = await Promise.all(Array.from({ length: 10 }, () => post(fast.url)));
    expect(Date.now() - started).toBeLessThan(1500);
    expect(quick.every((o) => o.ok)).toBe(true);
    expect(slow.requests).toHaveLength(10); // all ten were in flight at once
    await slow.close(); // the slow receiver hangs up: its deliveries fail, the others were long done
    expect((await Promise.all(stuck)).every((o) => !o.ok && o.error === 'webhook_network')).toBe(true);
  });
});

describe('destinations', () => {
  it('with the loopback setting off, refuses the same loopback URLs as url_destination_blocked without connecting', async () => {
    const r = await receiver();
    const lookup = countingLookup(['127.0.0.1']);
    for (const url of [`${r.url}/hook`, `http://localhost:${r.port}/`, `http://[::1]:${r.port}/`, 'https://127.0.0.1/', 'https://[::1]/', 'https://localhost/', 'https://2130706433/']) {
      expect(await post(url, { allowLoopback: false, lookup })).toEqual({ ok: false, error: 'url_destination_blocked' });
    }
    expect(await post('https://rebind.example.com/', { allowLoopback: false, lookup })).toEqual({ ok: false, error: 'url_destination_blocked' });
    expect(await post('https://mixed.example.com/', { allowLoopback: false, lookup: countingLookup(['8.8.8.8', '10.0.0.1']) })).toEqual({
      ok: false,
      error: 'url_destination_blocked',
    });
    await sleep(50);
    expect(r.connections).toBe(0);
    expect(r.requests).toHaveLength(0);
  });

  it('refuses a URL that no longer passes the checks as url_destination_blocked', async () => {
    for (const url of ['http://hooks.example.com/', 'https://user:p@hooks.example.com/', 'https://hooks.example.com:8443/', 'https://hooks.example.com/#x', 'not a url']) {
      expect(await post(url, { allowLoopback: false, lookup: countingLookup(['8.8.8.8']) })).toEqual({ ok: false, error: 'url_destination_blocked' });
    }
  });

  it('resolves once and connects to the checked address: a second answer is never asked for', async () => {
    // Listening on 127.0.0.2 only, which no resolver gives for localhost: reached only through the checked answer.
    const r = await receiver(undefined, '127.0.0.2');
    // The first answer is checked and used; a second resolution would get 10.0.0.5 (and never arrive).
    const lookup = countingLookup(['127.0.0.2'], ['10.0.0.5']);
    expect(await post(`http://localhost:${r.port}/hook`, { lookup })).toEqual({ ok: true, status: 200 });
    expect(lookup.calls).toBe(1);
    expect(r.requests).toHaveLength(1);
    expect(r.requests[0].headers.host).toBe(`localhost:${r.port}`);
    // Each delivery checks again, with one resolution of its own.
    expect(await post(`http://localhost:${r.port}/hook`, { lookup })).toEqual({ ok: false, error: 'url_destination_blocked' });
    expect(lookup.calls).toBe(2);
  });

  it('gives https.request the checked public address as its only lookup answer, with the name for TLS and Host', async () => {
    const request = vi.mocked(https.request);
    let seen: https.RequestOptions | undefined;
    const answers: unknown[] = [];
    request.mockImplementationOnce(((options: https.RequestOptions) => {
      seen = options;
      const lookup = options.lookup as unknown as (host: string, opts: object, cb: (...args: unknown[]) => void) => void;
      lookup('hooks.example.com', {}, (...args) => answers.push(args));
      lookup('hooks.example.com', { all: true }, (...args) => answers.push(args));
      // Connect nowhere: fail as a refused connection would.
      const fake = Object.assign(new EventEmitter(), { reusedSocket: false, end: () => {}, destroy: () => {} });
      setImmediate(() => fake.emit('error', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })));
      return fake;
    }) as unknown as typeof https.request);
    const lookup = countingLookup(['93.184.215.14'], ['10.0.0.1']);
    const outcome = await postWebhook({ url: 'https://hooks.example.com/in?a=1', body: ENVELOPE, headers: HEADERS, allowLoopback: false, lookup, timeoutMs: 1000 });
    expect(outcome).toEqual({ ok: false, error: 'webhook_network' });
    expect(lookup.calls).toBe(1);
    expect(request).toHaveBeenCalledTimes(1);
    expect(seen).toMatchObject({ method: 'POST', host: 'hooks.example.com', port: 443, path: '/in?a=1', servername: 'hooks.example.com', family: 4 });
    expect(answers).toEqual([
      [null, '93.184.215.14', 4],
      [null, [{ address: '93.184.215.14', family: 4 }]],
    ]);
  });
});

describe('TLS', () => {
  // A self-signed certificate for localhost: no public authority vouches for it.
  const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgD9DkEJzn9fSgIfy/
mtW2EyL1fu4rJJdZwuZarpfs1xahRANCAARn4khMXDSo2gT78zTybvmC2HPUcA0Y
Jx3a90LMqcdhboXh9d4GufCTZOdKar62xcgJfhoeF/F7UfDLsq4JKXGD
-----END PRIVATE KEY-----`;
  const CERT = `-----BEGIN CERTIFICATE-----
MIIBmjCCAUGgAwIBAgIUSZZvFE8wmqD923UiGrbDYGV6+eYwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyNjA5MTQzMloYDzIxMjYxMTAy
MDkxNDMyWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAARn4khMXDSo2gT78zTybvmC2HPUcA0YJx3a90LMqcdhboXh9d4GufCT
ZOdKar62xcgJfhoeF/F7UfDLsq4JKXGDo28wbTAdBgNVHQ4EFgQUgCdBAPIaobZF
8PRR8UB9cRb5WIwwHwYDVR0jBBgwFoAUgCdBAPIaobZF8PRR8UB9cRb5WIwwDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwCgYIKoZI
zj0EAwIDRwAwRAIgQMvMSE+M/kbGyVX+RWctCFYgJ6pb7PKaHkrgOnzMLwMCIHI1
V89/7IgsGgg07xfor/npxaQrCW5mXX7MfGFWdzD6
-----END CERTIFICATE-----`;

  let server: https.Server;
  let port: number;
  const names: (string | undefined)[] = [];
  let requests = 0;
  beforeAll(async () => {
    server = https.createServer(
      {
        key: KEY,
        cert: CERT,
        SNICallback: (name, callback) => {
          names.push(name);
          callback(null, undefined);
        },
      },
      (_, res) => {
        requests += 1;
        res.end('ok');
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('connects to the checked address with the URL\'s name as SNI, and refuses a certificate no authority signed', async () => {
    const lookup = countingLookup(['127.0.0.1']);
    const outcome = await postWebhook({ url: `https://localhost:${port}/hook`, body: ENVELOPE, headers: HEADERS, allowLoopback: true, lookup, timeoutMs: 2000 });
    expect(outcome).toEqual({ ok: false, error: 'webhook_network' });
    expect(lookup.calls).toBe(1);
    expect(names).toEqual(['localhost']);
    expect(requests).toBe(0);
  });
});
