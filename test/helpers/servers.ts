/** Throwaway HTTP servers of the tests (pages on an origin, receivers): listen on loopback, close for good. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on a free loopback port; resolves with the server's origin. */
export async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes the server and every connection it holds (keep-alive ones included). */
export const closeServer = (server: Server | undefined) =>
  new Promise<void>((resolve) => {
    if (!server?.listening) return resolve();
    server.closeAllConnections();
    server.close(() => resolve());
  });

/** A webhook receiver on loopback: each request's path and body kept in `received` (in arrival order), answered 200. */
export async function webhookReceiver(): Promise<{ server: Server; url: string; received: Array<{ path: string; body: string }> }> {
  const received: Array<{ path: string; body: string }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push({ path: req.url!, body });
      res.end('ok');
    });
  });
  return { server, url: await listen(server), received };
}

/**
 * Two origins serving one page at `/` (browser tests: a page on an origin a key lists, the same page on
 * one it does not). The page is set once the origins are known (`setHtml`).
 */
export async function pageOrigins(): Promise<{ originA: string; originB: string; setHtml(html: string): void; close(): Promise<void> }> {
  let html = '';
  const serve = () =>
    createServer((req, res) => {
      if (req.url === '/') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
        res.end(html);
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('not found');
      }
    });
  const servers = [serve(), serve()];
  const [originA, originB] = [await listen(servers[0]), await listen(servers[1])];
  return {
    originA,
    originB,
    setHtml: (h) => {
      html = h;
    },
    close: async () => {
      await Promise.all(servers.map(closeServer));
    },
  };
}
