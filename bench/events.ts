/**
 * Events API through the local platform (`bin/local.ts`, a child process), each figure beside a
 * baseline measured in the same run:
 *
 *   publish    ours: `POST .../events` with 100 events per call into a workspace with one pull
 *              subscription matching them, BENCH_CONNECTIONS connections; events accepted per second.
 *              baseline: raw better-sqlite3 in this process inserting the same rows (the event and its
 *              inbox message per event, one transaction per 100), back to back.
 *   latency    ours: one-event publishes at 500 events/s to a webhook subscription whose receiver
 *              listens on loopback; publish sent -> delivery received, p50 and p99, after a warm-up
 *              of min(BENCH_WARMUP_S, 2) s at the same rate (not measured).
 *              baseline: the bare HTTP round trip from this process to that receiver, same rate.
 *
 * Targets: at least 10,000 events/s published; p99 publish-to-delivery at most 50 ms. The platform runs
 * with EVENTS_RATE_LIMIT_PER_MINUTE=0 (the 600 calls a minute would otherwise be the figure).
 * Knobs: BENCH_ROUNDS (3), BENCH_WARMUP_S (5), BENCH_DURATION_S (10), BENCH_CONNECTIONS (32; 8 are used
 * for publish: a call carries 100 events).
 */
import Database from 'better-sqlite3';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { monotonicUlid } from '../lambdas/shared/ids.js';
import { loadSettings } from './support/env.js';
import { load, median } from './support/load.js';
import { freePort, makeTempDir, startServer, type ServerProcess } from './support/processes.js';
import { fmt, fmtInt, type Table } from './support/table.js';
import type { Benchmark, BenchReport } from './support/types.js';

const TARGET_EVENTS_PER_S = 10_000;
const TARGET_P99_MS = 50;
const EVENTS_PER_CALL = 100;
const RATE = 500;
const PUBLISH_CONNECTIONS = 8;

const batchBody = JSON.stringify({ events: Array.from({ length: EVENTS_PER_CALL }, (_, i) => ({ type: 'bench.item', data: { i, note: 'a small payload of a few dozen bytes' } })) });

/** Raw SQLite doing the storage work of a publish: per event its row and its inbox row, 100 a transaction. */
function sqliteBaseline(path: string, seconds: number): { eventsPerS: number } {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE kv (pk TEXT NOT NULL, sk TEXT NOT NULL, item TEXT NOT NULL, PRIMARY KEY (pk, sk)) WITHOUT ROWID');
  const insert = db.prepare('INSERT INTO kv (pk, sk, item) VALUES (?, ?, ?)');
  const envelope = (id: string, i: number) => JSON.stringify({ event_id: id, type: 'bench.item', source: 'key', time: new Date().toISOString(), data: { i, note: 'a small payload of a few dozen bytes' } });
  const batch = db.transaction(() => {
    for (let i = 0; i < EVENTS_PER_CALL; i++) {
      const id = `evt_${monotonicUlid()}`;
      const e = envelope(id, i);
      insert.run('evt#ws', id, e);
      insert.run('inbox#sub', id, e);
    }
  });
  let events = 0;
  const until = performance.now() + seconds * 1000;
  const started = performance.now();
  while (performance.now() < until) {
    batch();
    events += EVENTS_PER_CALL;
  }
  db.close();
  return { eventsPerS: events / ((performance.now() - started) / 1000) };
}

/** Sends `count` requests at `rate` a second (open loop), each with `send`; resolves with each one's latency in ms. */
async function paced(count: number, rate: number, send: (i: number) => Promise<number>): Promise<number[]> {
  const latencies: Promise<number>[] = [];
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    latencies.push(send(i));
  }
  return Promise.all(latencies);
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

export const benchmark: Benchmark = {
  name: 'events',
  title: 'Events API: publish throughput into a pull subscription, publish-to-webhook latency',
  async run(progress): Promise<BenchReport> {
    const { rounds, warmup, duration } = loadSettings();
    const temp = makeTempDir('bench-events-');
    let server: ServerProcess | undefined;
    const receiver = http.createServer();
    try {
      // The webhook receiver: answers 204 at once and reports each event id's arrival time.
      const arrivals = new Map<string, (t: number) => void>();
      /** Deliveries that arrived before their publish answered (the waiter is not registered yet). */
      const early = new Map<string, number>();
      receiver.on('request', (req, res) => {
        const id = req.headers['x-event-id'] as string | undefined;
        req.resume();
        req.on('end', () => {
          res.statusCode = 204;
          res.end();
          if (!id) return;
          const waiter = arrivals.get(id);
          if (waiter) waiter(performance.now());
          else early.set(id, performance.now());
        });
      });
      receiver.keepAliveTimeout = 65_000;
      await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
      const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

      const dataDir = join(temp.path, 'data');
      const [ai, data, events] = [await freePort(), await freePort(), await freePort()];
      server = await startServer(
        'platform',
        'bin/local.ts',
        { DATA_DIR: dataDir, AI_PORT: String(ai), DATA_PORT: String(data), EVENTS_PORT: String(events), OPS_PORT: '0', CONSOLE_PORT: '0', LOG_LEVEL: 'silent', EVENTS_ALLOW_LOOPBACK_WEBHOOKS: '1', EVENTS_RATE_LIMIT_PER_MINUTE: '0' },
        /Events API\s+http:/,
      );
      const eventsUrl = /Events API\s+(http:\S+)/.exec(server.output())![1];
      const { secret_key, workspace_id } = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
      const auth = { authorization: `Bearer ${secret_key}`, 'content-type': 'application/json' };
      const ws = `${eventsUrl}/v1/workspaces/${workspace_id}`;
      const post = async (path: string, body: unknown) => {
        const res = await fetch(`${ws}${path}`, { method: 'POST', headers: auth, body: JSON.stringify(body) });
        if (res.status >= 300) throw new Error(`${path}: ${res.status} ${await res.text()}`);
        return res.json() as Promise<any>;
      };
      await post('/subscriptions', { types: ['bench.*'], delivery: { mode: 'pull' } });
      await post('/subscriptions', { types: ['hook.*'], delivery: { mode: 'webhook', url: `${receiverUrl}/hook` } });

      const publish = { baseline: [] as number[], ours: [] as number[] };
      const latency = { baseline: [] as { p50: number; p99: number }[], ours: [] as { p50: number; p99: number }[] };
      const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
      const roundTrip = (url: URL, headers: Record<string, string>, body: string) =>
        new Promise<void>((resolve, reject) => {
          const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
            res.resume();
            res.on('end', () => (res.statusCode! < 300 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
          });
          req.on('error', reject);
          req.end(body);
        });
      const count = Math.max(200, Math.round(RATE * duration));

      for (let round = 1; round <= rounds; round++) {
        sqliteBaseline(join(temp.path, `warm-${round}.db`), Math.min(warmup, 2));
        const b = sqliteBaseline(join(temp.path, `baseline-${round}.db`), duration);
        publish.baseline.push(b.eventsPerS);
        await load({ url: `${ws}/events`, method: 'POST', headers: auth, body: batchBody, connections: PUBLISH_CONNECTIONS, duration: warmup, expectStatus: 202, serverPgid: server.pgid });
        const o = await load({ url: `${ws}/events`, method: 'POST', headers: auth, body: batchBody, connections: PUBLISH_CONNECTIONS, duration, expectStatus: 202, serverPgid: server.pgid });
        publish.ours.push(o.rps * EVENTS_PER_CALL);
        progress(`round ${round}/${rounds} publish  baseline ${fmtInt(b.eventsPerS)} events/s   ours ${fmtInt(o.rps * EVENTS_PER_CALL)} events/s (p99 ${fmt(o.latencyP99Ms)} ms a call)`);

        const hook = new URL(`${receiverUrl}/hook`);
        const bare = await paced(count, RATE, async () => {
          const t0 = performance.now();
          await roundTrip(hook, { 'content-type': 'application/json' }, '{"probe":true}');
          return performance.now() - t0;
        });
        latency.baseline.push({ p50: percentile(bare, 50), p99: percentile(bare, 99) });
        const publishUrl = new URL(`${ws}/events`);
        const deliver = (phase: string) => async (i: number) => {
          const t0 = performance.now();
          const body = JSON.stringify({ event: { type: 'hook.item', data: { i, round, phase } } });
          const res = await fetch(publishUrl, { method: 'POST', headers: auth, body });
          const id = ((await res.json()) as any).accepted[0].event_id as string;
          const at = early.get(id) ?? await new Promise<number>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`event ${id} not delivered in 30 s`)), 30_000);
            arrivals.set(id, (t) => {
              clearTimeout(timer);
              arrivals.delete(id);
              resolve(t);
            });
          });
          return at - t0;
        };
        // Warm up as the publish phase does: the delivery path's first seconds after the publish load
        // (its code paths compiled, receiver connections opened) are not its steady state.
        await paced(Math.round(RATE * Math.min(warmup, 2)), RATE, deliver('warmup'));
        const delivered = await paced(count, RATE, deliver('measured'));
        latency.ours.push({ p50: percentile(delivered, 50), p99: percentile(delivered, 99) });
        progress(`round ${round}/${rounds} latency  bare round trip p50 ${fmt(percentile(bare, 50))} / p99 ${fmt(percentile(bare, 99))} ms   publish-to-delivery p50 ${fmt(percentile(delivered, 50))} / p99 ${fmt(percentile(delivered, 99))} ms`);
      }

      const oursPublish = median(publish.ours);
      const oursP99 = median(latency.ours.map((l) => l.p99));
      const worstP99 = Math.max(...latency.ours.map((l) => l.p99));
      const tables: Table[] = [
        {
          title: `publish, ${EVENTS_PER_CALL} events a call, one pull subscription: events per second`,
          headers: ['target', ...publish.ours.map((_, i) => `round ${i + 1}`), 'median'],
          rows: [
            ['baseline (better-sqlite3 in-process, same rows)', ...publish.baseline.map(fmtInt), fmtInt(median(publish.baseline))],
            ['ours (bin/local.ts over HTTP)', ...publish.ours.map(fmtInt), fmtInt(oursPublish)],
          ],
        },
        {
          title: `latency at ${RATE} events/s (ms)`,
          headers: ['target', ...latency.ours.map((_, i) => `round ${i + 1} p50 / p99`), 'median p99'],
          rows: [
            ['baseline (bare HTTP round trip to the receiver)', ...latency.baseline.map((l) => `${fmt(l.p50)} / ${fmt(l.p99)}`), fmt(median(latency.baseline.map((l) => l.p99)))],
            ['ours (publish sent -> webhook received)', ...latency.ours.map((l) => `${fmt(l.p50)} / ${fmt(l.p99)}`), fmt(oursP99)],
          ],
        },
      ];
      const pass = Math.min(...publish.ours) >= TARGET_EVENTS_PER_S && worstP99 <= TARGET_P99_MS;
      return {
        tables,
        notes: ['Every round must meet the targets (margins, not medians).'],
        figures: [
          { name: 'publish events/s', value: oursPublish },
          { name: 'raw SQLite publish events/s', value: median(publish.baseline) },
          { name: 'delivery p50 ms', value: median(latency.ours.map((l) => l.p50)), digits: 1 },
          { name: 'delivery p99 ms', value: oursP99, digits: 1 },
          { name: 'bare round trip p99 ms', value: median(latency.baseline.map((l) => l.p99)), digits: 1 },
        ],
        verdict: { pass, summary: `publish ${fmtInt(oursPublish)} events/s (>= ${fmtInt(TARGET_EVENTS_PER_S)}), p99 delivery ${fmt(worstP99)} ms worst round (<= ${TARGET_P99_MS} ms)` },
      };
    } finally {
      await server?.stop();
      await new Promise((r) => receiver.close(r));
      temp.remove();
    }
  },
};
