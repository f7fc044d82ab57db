/**
 * The AI benchmark's floor (bench/ai.ts): the least a gateway in its own process can add, a node:http
 * server that pipes each request to the model upstream (UPSTREAM, an origin) and its answer back, on
 * keep-alive connections, reading nothing. What it adds over calling the upstream directly is the hop
 * itself on this machine under the same load: two more sockets, two more processes to wake. Prints
 * `bare proxy <origin>`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const upstream = new URL(process.env.UPSTREAM ?? '');
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

const server = http.createServer((req, res) => {
  const out = http.request(
    { hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, agent, headers: { ...req.headers, host: upstream.host } },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  out.on('error', () => res.destroy());
  req.pipe(out);
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`bare proxy http://127.0.0.1:${(server.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
