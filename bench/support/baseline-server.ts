/**
 * The baseline for HTTP benchmarks: a bare node:http server answering every request with the bytes
 * in BODY_FILE (status 200, CONTENT_TYPE). Listens on 127.0.0.1:PORT and prints its URL when ready.
 * WORKERS > 1 runs that many node:cluster workers on the port, as `npm start` runs LOCAL_WORKERS.
 */
import cluster from 'node:cluster';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';

const workers = Number(process.env.WORKERS ?? 1);
const port = Number(process.env.PORT ?? 0);

if (cluster.isPrimary && workers > 1) {
  let listening = 0;
  cluster.on('listening', (_worker, address) => {
    if (++listening === workers) process.stdout.write(`Baseline    http://127.0.0.1:${address.port}\n`);
  });
  for (let i = 0; i < workers; i++) cluster.fork();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill(signal);
      cluster.on('exit', () => Object.keys(cluster.workers ?? {}).length === 0 && process.exit(0));
    });
  }
} else {
  const body = readFileSync(process.env.BODY_FILE ?? '');
  const headers = { 'content-type': process.env.CONTENT_TYPE ?? 'application/json', 'content-length': String(body.length) };

  const server = createServer((_req, res) => {
    res.writeHead(200, headers);
    res.end(body);
  });

  server.listen(port, '127.0.0.1', () => {
    const { port: bound } = server.address() as { port: number };
    if (cluster.isPrimary) process.stdout.write(`Baseline    http://127.0.0.1:${bound}\n`);
  });

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      server.close(() => process.exit(0));
      server.closeIdleConnections();
    });
  }
}
