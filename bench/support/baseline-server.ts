/**
 * The baseline for HTTP benchmarks: a bare node:http server answering every request with the bytes
 * in BODY_FILE (status 200, CONTENT_TYPE). Listens on 127.0.0.1:PORT and prints its URL when ready.
 */
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';

const body = readFileSync(process.env.BODY_FILE ?? '');
const headers = { 'content-type': process.env.CONTENT_TYPE ?? 'application/json', 'content-length': String(body.length) };

const server = createServer((_req, res) => {
  res.writeHead(200, headers);
  res.end(body);
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  process.stdout.write(`Baseline    http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    server.closeIdleConnections();
  });
}
