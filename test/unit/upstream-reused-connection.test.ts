/**
 * The gateway's upstream client (lambdas/ai/providers/upstream-http.ts) sends a request again when the
 * pooled keep-alive connection it went out on turns out closed (reset before any answer): the race
 * between an upstream closing an idle connection and the next call reusing it answered 503
 * route_unavailable (seen in vector-crash under load). A fresh connection's reset is not retried.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { post, readText } from '../../lambdas/ai/providers/upstream-http.js';

const servers: net.Server[] = [];
const sockets = new Set<net.Socket>();
afterEach(async () => {
  // The client's pool keeps its connections open: close them, or the server never closes.
  for (const socket of sockets) socket.destroy();
  for (const s of servers.splice(0)) await new Promise((resolve) => s.close(resolve));
});

/**
 * A raw HTTP/1.1 upstream: `decide(n, onConnection)` says for the n-th request (and the how-many-th on
 * its connection) whether to answer `ok` (keep-alive) or reset the connection without answering.
 */
async function upstream(decide: (n: number, onConnection: number) => 'ok' | 'reset'): Promise<{ url: string; requests: () => number }> {
  let n = 0;
  const server = net.createServer((socket) => {
    let onConnection = 0;
    let buffered = '';
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.slice(end + 4 + length);
        if (decide(++n, ++onConnection) === 'reset') return void socket.resetAndDestroy();
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: keep-alive\r\n\r\n{"ok":true}');
      }
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/embeddings`, requests: () => n };
}

const call = async (url: string) => {
  const res = await post(url, { 'content-type': 'application/json' }, '{}', new AbortController().signal);
  return { status: res.status, text: await readText(res.body, 1024, new AbortController().signal) };
};

describe('the upstream client on a pooled connection', () => {
  it('sends again on a fresh connection when the pooled one is reset before any answer', async () => {
    // The second request on a connection finds it closed, as an idle connection an upstream just dropped.
    const u = await upstream((_, onConnection) => (onConnection === 1 ? 'ok' : 'reset'));
    expect(await call(u.url)).toEqual({ status: 200, text: '{"ok":true}' });
    expect(await call(u.url)).toEqual({ status: 200, text: '{"ok":true}' });
    expect(u.requests()).toBe(3);
  });

  it('never sends again when a fresh connection fails: the upstream may have read the request', async () => {
    const u = await upstream(() => 'reset');
    await expect(call(u.url)).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(u.requests()).toBe(1);
  });
});
