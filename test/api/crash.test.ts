/**
 * Crash safety of the local server: SIGKILL in the middle of a stream of batch writes, restart on the
 * same DATA_DIR, and check that every batch is all or nothing and every acknowledged batch is there.
 *
 * Each of several clients writes batches one after another. A batch is 10 creates (ids
 * `b<client>_<seq>-<i>`, an indexed `n` and a unique `tag`) plus an update of the client's counter
 * record from version seq+1 to seq+2 setting `count` to seq+1. Since the counter moves in the same
 * transaction as the creates, after a restart a client with counter `count` = K must have exactly the
 * batches 0..K-1, each whole, and nothing of batch K: a half-applied transaction (creates without the
 * counter, the counter without creates, some creates only, records without their index entries or
 * unique guards, guards without records) fails one of the checks below.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';

const CLIENTS = 4;
const PER_BATCH = 10;
const CYCLES = 3;
const DB = 'crash';

const dataDir = mkdtempSync(join(tmpdir(), 'crash-'));
let server: Started | undefined;
let key: string;

interface Started {
  process: LocalProcess;
  /** The Data API. */
  url: string;
}

afterAll(async () => {
  // Never leave a server behind, whatever failed.
  if (server) await crashLocalProcess(server.process);
  rmSync(dataDir, { recursive: true, force: true });
});

/** Starts `bin/local.ts` (node with tsx's loader, its default worker processes) in a process group of its own. */
async function start(): Promise<Started> {
  const started = await startLocalProcess({ DATA_DIR: dataDir });
  server = { process: started, url: started.urls.data };
  return server;
}

/** The crash: SIGKILL to the primary and every worker at once. */
const kill = (s: Started) => crashLocalProcess(s.process);

async function api(url: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}/v1/databases/${DB}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function listAll(url: string, collection: string, query: string): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | null = null;
  do {
    const a = await api(url, 'GET', `/collections/${collection}/records?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    out.push(...a.body.records);
    cursor = a.body.next_cursor;
  } while (cursor);
  return out;
}

const batchId = (client: number, seq: number) => `b${client}_${seq}`;
const tagOf = (client: number, seq: number, i: number) => `t${client}_${seq}_${i}`;

function batchOps(client: number, seq: number) {
  const creates = Array.from({ length: PER_BATCH }, (_, i) => ({
    op: 'create',
    collection: 'items',
    id: `${batchId(client, seq)}-${i}`,
    data: { n: seq, tag: tagOf(client, seq, i) },
  }));
  const counter = { op: 'update', collection: 'counters', id: `c${client}`, version: seq + 1, data: { count: seq + 1, last: batchId(client, seq) } };
  return [...creates, counter];
}

interface CycleLoad {
  acked: Set<string>;
  ackedPerClient: number[];
  unexpected: string[];
  killedAfterMs: number;
}

/** Runs the clients against the server and SIGKILLs it `killAfterMs` after the first acknowledged batch, with requests in flight. */
async function loadAndKill(s: Started, next: number[], killAfterMs: number): Promise<CycleLoad> {
  let killed = false;
  const acked = new Set<string>();
  const ackedPerClient = Array(CLIENTS).fill(0);
  const unexpected: string[] = [];
  let flowing!: () => void;
  const firstAck = new Promise<void>((resolve) => (flowing = resolve));
  const client = async (c: number) => {
    while (!killed) {
      const seq = next[c];
      let status: number;
      try {
        const res = await fetch(`${s.url}/v1/databases/${DB}/batch`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ ops: batchOps(c, seq) }),
        });
        status = res.status;
        // The server answers 200 only after the commit: the status alone acknowledges the batch.
        if (status === 200) {
          acked.add(batchId(c, seq));
          ackedPerClient[c]++;
          next[c]++;
          flowing();
        }
        const text = await res.text().catch(() => '');
        if (status !== 200) unexpected.push(`${batchId(c, seq)}: ${status} ${text}`);
      } catch (error) {
        if (!killed) unexpected.push(`${batchId(c, seq)}: ${(error as Error).message}`);
        return;
      }
      if (status !== 200) return flowing(); // reported; do not hold the kill back
    }
  };
  const clients = Array.from({ length: CLIENTS }, (_, c) => client(c));
  await firstAck;
  const started = Date.now();
  await new Promise((resolve) => setTimeout(resolve, killAfterMs));
  killed = true;
  await kill(s);
  const killedAfterMs = Date.now() - started;
  await Promise.all(clients);
  return { acked, ackedPerClient, unexpected, killedAfterMs };
}

describe('SIGKILL during a stream of batch writes', () => {
  beforeAll(async () => {
    const s = await start();
    key = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8')).secret_key;
    expect((await api(s.url, 'PUT', '')).status).toBe(201);
    const items = await api(s.url, 'PUT', '/collections/items', {
      fields: [
        { name: 'n', type: 'integer', indexed: true },
        { name: 'tag', type: 'text', unique: true },
      ],
    });
    expect(items.status, JSON.stringify(items.body)).toBe(201);
    const counters = await api(s.url, 'PUT', '/collections/counters', { fields: [{ name: 'count', type: 'integer', required: true }, { name: 'last', type: 'text' }] });
    expect(counters.status, JSON.stringify(counters.body)).toBe(201);
    for (let c = 0; c < CLIENTS; c++) {
      expect((await api(s.url, 'POST', '/collections/counters/records', { id: `c${c}`, count: 0 })).status).toBe(201);
    }
  });

  it('keeps every batch whole and every acknowledged batch, over three kill/restart cycles', async () => {
    const next = Array(CLIENTS).fill(0); // the next batch each client writes = its counter's count
    const figures: string[] = [];
    let s = server!;
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      const before = [...next];
      const load = await loadAndKill(s, next, 1000 + Math.floor(Math.random() * 800));
      expect(load.unexpected).toEqual([]);
      expect(load.acked.size).toBeGreaterThan(0);

      const r = await start();
      // Counters: version = 1 + batches applied; each batch applied moved count by one.
      const counts: number[] = [];
      for (let c = 0; c < CLIENTS; c++) {
        const counter = await api(r.url, 'GET', `/collections/counters/records/c${c}`);
        expect(counter.status).toBe(200);
        const count = counter.body.count as number;
        expect(counter.body.version).toBe(count + 1);
        if (count > 0) expect(counter.body.last).toBe(batchId(c, count - 1));
        // Every acknowledged batch is counted; at most the one batch in flight at the kill went in unacknowledged.
        expect(count).toBeGreaterThanOrEqual(before[c] + load.ackedPerClient[c]);
        expect(count).toBeLessThanOrEqual(before[c] + load.ackedPerClient[c] + 1);
        counts.push(count);
      }

      // Records: grouped by batch, every batch whole, exactly the batches the counter counts.
      const records = await listAll(r.url, 'items', 'limit=100');
      const batches = new Map<string, any[]>();
      for (const rec of records) {
        const id = rec.id.slice(0, rec.id.lastIndexOf('-'));
        batches.set(id, [...(batches.get(id) ?? []), rec]);
      }
      for (const [id, recs] of batches) {
        expect(recs.length, `batch ${id}`).toBe(PER_BATCH);
        const [c, seq] = id.slice(1).split('_').map(Number);
        expect(recs.map((x) => [x.n, x.tag, x.version])).toEqual(Array.from({ length: PER_BATCH }, (_, i) => [seq, tagOf(c, seq, i), 1]));
      }
      const expected = counts.flatMap((count, c) => Array.from({ length: count }, (_, seq) => batchId(c, seq)));
      expect([...batches.keys()].sort()).toEqual(expected.sort());
      for (const id of load.acked) expect(batches.has(id), `acknowledged ${id}`).toBe(true);

      // Index entries: the index on n yields exactly the same records.
      const byN = await listAll(r.url, 'items', 'sort=n&limit=100');
      expect(byN.map((x) => x.id).sort()).toEqual(records.map((x) => x.id).sort());
      // Unique guards: held for the last applied batch, absent for the batch that was not applied.
      for (let c = 0; c < CLIENTS; c++) {
        if (counts[c] > 0) {
          const taken = await api(r.url, 'POST', '/collections/items/records', { id: `probe${c}`, tag: tagOf(c, counts[c] - 1, PER_BATCH - 1) });
          expect(taken.body?.error?.code).toBe('unique_violation');
        }
        const free = await api(r.url, 'POST', '/collections/items/records', { id: `probe${c}`, tag: tagOf(c, counts[c], 0) });
        expect(free.status, JSON.stringify(free.body)).toBe(201);
        expect((await api(r.url, 'DELETE', `/collections/items/records/probe${c}`)).status).toBe(204);
      }

      const unacked = counts.reduce((sum, count, c) => sum + count - before[c] - load.ackedPerClient[c], 0);
      figures.push(
        `cycle ${cycle + 1}: killed after ${load.killedAfterMs} ms, ${load.acked.size} batches acknowledged ` +
          `(${load.ackedPerClient.join('/')} per client), ${unacked} applied but unacknowledged, ${records.length} records in all`,
      );
      for (let c = 0; c < CLIENTS; c++) next[c] = counts[c];
      s = r; // the restarted server takes the next cycle's load
    }
    console.log(figures.join('\n'));
  }, 60_000);
});
