/**
 * Reading the activity log back when several writers (processes, function instances) wrote segments
 * that overlap in time: every page comes out newest first, and paging with the cursor returns every
 * event exactly once, with windows and filters. On both key-value adapters: SQLite on disk, and
 * DynamoDB on dynalite (segments are plain puts and queries, which dynalite implements).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import type { KeyValueStore } from '../../lambdas/engine/ports.js';
import { startDynalite } from '../helpers/dynalite.js';
import { listActivity, type ActivityQuery } from '../../lambdas/activity/listing.js';
import {
  ACTIVITY_COLUMNS,
  ActivityRecorder,
  SEGMENT_MAX_SPAN_MS,
  activityDay,
  activityPartition,
  activitySortKey,
  type ActivityEntry,
} from '../../lambdas/activity/segments.js';

const ORG = 'org_log';
// Three seconds before the last midnight UTC, so the events fall on two day partitions (and are not
// past their retention, which the store enforces on reads).
const T0 = Math.floor(Date.now() / 86_400_000) * 86_400_000 - 3000;
const SPREAD_MS = 6000;

/** A deterministic generator, so a failure can be replayed. */
function random(seed: number) {
  return () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
}

interface Made {
  key: string;
  at: number;
  kind: string;
  app: string | null;
}

const stores: [string, () => Promise<{ kv: KeyValueStore; close(): Promise<void> }>][] = [
  [
    'embedded (SQLite)',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'actlog-'));
      const engine = createEmbeddedEngine({ dataDir: dir });
      return { kv: engine.kv, close: async () => (await engine.close(), rmSync(dir, { recursive: true, force: true })) };
    },
  ],
  [
    'aws (DynamoDB on dynalite)',
    async () => {
      const dynamo = await startDynalite();
      return { kv: new DynamoKeyValueStore(dynamo.client, dynamo.tableName, systemClock), close: () => dynamo.close() };
    },
  ],
];

describe.each(stores)('activity log over segments of several writers: %s', (_name, open) => {
  let store: { kv: KeyValueStore; close(): Promise<void> };
  let engine: { kv: KeyValueStore };
  const made: Made[] = [];

  beforeAll(async () => {
    store = await open();
    engine = store;
    const next = random(7);
    const writers = [new ActivityRecorder({ intervalMs: 60_000 }), new ActivityRecorder({ intervalMs: 60_000 }), new ActivityRecorder({ intervalMs: 60_000 })];
    for (let i = 0; i < 600; i++) {
      // Each writer sees its own events roughly in time order, as a process does; writers overlap.
      const at = T0 + Math.floor((i / 600) * SPREAD_MS + next() * 400);
      const id = `act_${String(i).padStart(5, '0')}${Math.floor(next() * 1e6)}`;
      const kind = next() < 0.3 ? 'record.write' : 'api.call';
      const app = next() < 0.5 ? 'app_a' : null;
      const event: Record<string, string | number> = { id, at_ms: at, kind, ...(app ? { application_id: app } : {}) };
      const row = ACTIVITY_COLUMNS.map((c) => event[c] ?? null);
      const entry: ActivityEntry = { pk: activityPartition(ORG, activityDay(at)), key: activitySortKey(at, id), at, organizationId: ORG, row, filePk: null, bytes: 300 };
      const writer = writers[Math.floor(next() * writers.length)];
      writer.add(engine.kv, entry);
      made.push({ key: entry.key, at, kind, app });
      // Writers flush at unrelated moments, as their timers fire.
      if (next() < 0.02) await writer.flush();
    }
    for (const w of writers) await w.flush();
    made.sort((a, b) => (a.key < b.key ? 1 : -1));
  });
  afterAll(() => store.close());

  const now = T0 + SPREAD_MS + 1000;
  const all = (q: Partial<ActivityQuery> = {}): ActivityQuery => ({ from: 0, to: now, kinds: null, file_sha256: null, ...q });

  async function pageThrough(q: ActivityQuery, limit: number, caller = { organizationId: ORG, applicationId: null as string | null }) {
    const keys: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = await listActivity(engine.kv, caller, q, { limit, after, now });
      keys.push(...page.items.map((i) => activitySortKey(i.at_ms, i.id)));
      after = page.after ?? undefined;
      expect(++pages).toBeLessThan(1000);
    } while (after);
    return keys;
  }

  it('wrote overlapping segments (the case the merge exists for)', async () => {
    const segments = [
      ...(await engine.kv.query({ pk: activityPartition(ORG, activityDay(T0)), limit: 1000 })).items,
      ...(await engine.kv.query({ pk: activityPartition(ORG, activityDay(T0 + SPREAD_MS)), limit: 1000 })).items,
    ];
    const spans = segments.map((s) => [s.oldest_ms as number, Number(String(s.sk).slice(0, 15))]);
    for (const [oldest, newest] of spans) expect(newest - oldest).toBeLessThanOrEqual(SEGMENT_MAX_SPAN_MS);
    const overlapping = spans.some(([o1, n1], i) => spans.some(([o2, n2], j) => i !== j && o1 < n2 && o2 < n1));
    expect(overlapping).toBe(true);
  });

  it.each([1, 7, 100, 500])('pages of %i: every event once, newest first', async (limit) => {
    expect(await pageThrough(all(), limit)).toEqual(made.map((m) => m.key));
  });

  it('a window [from, to) and a kind filter select exactly their events', async () => {
    const from = T0 + 1500;
    const to = T0 + 4200;
    const want = made.filter((m) => m.at >= from && m.at < to && m.kind === 'record.write').map((m) => m.key);
    expect(want.length).toBeGreaterThan(10);
    expect(await pageThrough(all({ from, to, kinds: ['record.write'] }), 9)).toEqual(want);
  });

  it("an application's credential sees only its application's events", async () => {
    const want = made.filter((m) => m.app === 'app_a').map((m) => m.key);
    expect(await pageThrough(all(), 50, { organizationId: ORG, applicationId: 'app_a' })).toEqual(want);
  });
});
