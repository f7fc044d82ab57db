import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SqliteQueue, runConsumer } from '../../lambdas/engine/embedded/queue.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import type { QueueMessage } from '../../lambdas/engine/ports.js';
import { queueContract } from './queue-contract.js';

function open() {
  const dir = mkdtempSync(join(tmpdir(), 'queue-'));
  const db = new Database(join(dir, 'queue.db'));
  db.pragma('journal_mode = WAL');
  const clock = new ManualClock();
  return {
    db,
    clock,
    queue: new SqliteQueue(db, clock),
    cleanup: async () => {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

queueContract('embedded (SQLite on disk)', async () => open(), { ordered: true });

describe('embedded queue', () => {
  it('keeps messages across reopening the database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'queue-'));
    try {
      const clock = new ManualClock();
      const db1 = new Database(join(dir, 'q.db'));
      const id = await new SqliteQueue(db1, clock).send('jobs', 'persisted');
      db1.close();
      const db2 = new Database(join(dir, 'q.db'));
      const got = await new SqliteQueue(db2, clock).receive('jobs', { max: 10, visibilitySeconds: 30 });
      expect(got.map((m) => [m.id, m.body])).toEqual([[id, 'persisted']]);
      db2.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('opens a database made before groups, keeping its messages (ungrouped) and taking grouped ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'queue-'));
    try {
      const clock = new ManualClock();
      const db1 = new Database(join(dir, 'q.db'));
      // The table and indexes as they were before messages had a group.
      db1.exec(`
        CREATE TABLE queue_messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, queue TEXT NOT NULL, body TEXT NOT NULL,
          sent_at INTEGER NOT NULL, visible_at INTEGER NOT NULL, receive_count INTEGER NOT NULL DEFAULT 0, receipt TEXT);
        CREATE INDEX queue_messages_visible ON queue_messages (queue, visible_at, seq);
        CREATE INDEX queue_messages_receipt ON queue_messages (receipt) WHERE receipt IS NOT NULL;`);
      const now = clock.now();
      for (const [i, body] of ['old1', 'old2'].entries()) {
        db1.prepare('INSERT INTO queue_messages (id, queue, body, sent_at, visible_at) VALUES (?, ?, ?, ?, ?)').run(`old-${i}`, 'jobs', body, now, now + i);
      }
      db1.close();
      const db2 = new Database(join(dir, 'q.db'));
      const queue = new SqliteQueue(db2, clock);
      new SqliteQueue(db2, clock); // a second opener finds the column there
      clock.advance(5);
      await queue.send('jobs', 'new', { group: 'org_a' });
      expect((await queue.receive('jobs', { max: 10, visibilitySeconds: 30 })).map((m) => m.body)).toEqual(['old1', 'old2', 'new']);
      const indexes = db2.prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'queue_messages'").all().map((r) => r.name);
      expect(indexes).toEqual(expect.arrayContaining(['queue_messages_group', 'queue_messages_in_flight']));
      db2.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a receive costs the same with 10,000 messages of one group queued as with 10 (the other group still gets its turn)', async () => {
    const f = open();
    try {
      const insert = f.db.prepare("INSERT INTO queue_messages (id, queue, body, sent_at, visible_at, grp) VALUES (?, 'knowledge', ?, ?, ?, 'org_a')");
      const now = f.clock.now();
      f.db.transaction(() => {
        for (let i = 0; i < 10_000; i++) insert.run(`a-${i}`, `a${i}`, now, now);
      })();
      f.clock.advance(1);
      await f.queue.send('knowledge', 'b', { group: 'org_b' });
      // As the local receiver takes items: two at a time, each deleted when done.
      const order: string[] = [];
      const times: number[] = [];
      let inFlight: QueueMessage[] = [];
      for (let round = 0; round < 50; round++) {
        const started = performance.now();
        const got = await f.queue.receive('knowledge', { max: 2 - inFlight.length, visibilitySeconds: 900 });
        times.push(performance.now() - started);
        order.push(...got.map((m) => m.body));
        inFlight.push(...got);
        await f.queue.delete('knowledge', inFlight[0].receipt);
        inFlight = inFlight.slice(1);
      }
      expect(order.indexOf('b')).toBeLessThanOrEqual(2);
      times.sort((x, y) => x - y);
      const median = times[Math.floor(times.length / 2)];
      console.log(`receive with 10,001 queued: median ${median.toFixed(3)} ms, max ${times.at(-1)!.toFixed(3)} ms`);
      // Low milliseconds on an idle machine (about 0.2); the bound leaves room for a loaded one.
      expect(median).toBeLessThan(10);
    } finally {
      await f.cleanup();
    }
  });

  it('does not hand a message out twice in one receive with a zero lease', async () => {
    const f = open();
    try {
      await f.queue.send('jobs', 'a');
      await f.queue.send('jobs', 'b');
      const got = await f.queue.receive('jobs', { max: 10, visibilitySeconds: 0 });
      expect(got.map((m) => m.body).sort()).toEqual(['a', 'b']);
      expect((await f.queue.receive('jobs', { max: 10, visibilitySeconds: 0 })).map((m) => m.receiveCount)).toEqual([2, 2]);
    } finally {
      await f.cleanup();
    }
  });
});

describe('runConsumer (embedded queue)', () => {
  let f: ReturnType<typeof open>;
  beforeEach(() => {
    f = open();
  });
  afterEach(async () => f.cleanup());

  const visible = () => f.db.prepare('SELECT count(*) AS n FROM queue_messages').get() as { n: number };

  it('deletes handled messages and brings failed ones back after the lease', async () => {
    const batches: QueueMessage[][] = [];
    const ids = {
      ok1: await f.queue.send('jobs', 'ok1'),
      bad: await f.queue.send('jobs', 'bad'),
      ok2: await f.queue.send('jobs', 'ok2'),
    };
    const consumer = runConsumer(
      f.queue,
      'jobs',
      async (messages) => {
        batches.push(messages);
        return { failed: messages.filter((m) => m.body === 'bad' && m.receiveCount === 1).map((m) => m.id) };
      },
      { clock: f.clock, idleMs: 100, visibilitySeconds: 30 },
    );
    try {
      await vi.waitFor(() => expect(visible().n).toBe(1));
      expect(batches[0].map((m) => m.body).sort()).toEqual(['bad', 'ok1', 'ok2']);
      // The failed message stays leased: idle polls before the lease ends find nothing.
      for (let i = 0; i < 5; i++) {
        f.clock.advance(100);
        await new Promise((r) => setTimeout(r, 5));
      }
      expect(batches).toHaveLength(1);
      await vi.waitFor(() => {
        f.clock.advance(5000);
        expect(batches).toHaveLength(2);
      });
      expect(batches[1].map((m) => ({ id: m.id, receiveCount: m.receiveCount }))).toEqual([{ id: ids.bad, receiveCount: 2 }]);
      await vi.waitFor(() => expect(visible().n).toBe(0));
    } finally {
      await consumer.stop();
    }
  });

  it('fails the whole batch when the consumer throws', async () => {
    let calls = 0;
    await f.queue.send('jobs', 'x');
    const consumer = runConsumer(
      f.queue,
      'jobs',
      async () => {
        calls++;
        if (calls === 1) throw new Error('boom');
        return { failed: [] };
      },
      { clock: f.clock, idleMs: 100, visibilitySeconds: 10, onError: () => {} },
    );
    try {
      await vi.waitFor(() => expect(calls).toBe(1));
      expect(visible().n).toBe(1);
      await vi.waitFor(() => {
        f.clock.advance(5000);
        expect(calls).toBe(2);
      });
      await vi.waitFor(() => expect(visible().n).toBe(0));
    } finally {
      await consumer.stop();
    }
  });

  it('stop waits for the batch in flight, and stops an idle consumer at once', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started = false;
    await f.queue.send('jobs', 'slow');
    const consumer = runConsumer(
      f.queue,
      'jobs',
      async () => {
        started = true;
        await gate;
        return { failed: [] };
      },
      { clock: f.clock, idleMs: 100 },
    );
    await vi.waitFor(() => expect(started).toBe(true));
    let stopped = false;
    const stopping = consumer.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(visible().n).toBe(0); // the batch was finished, delete included

    // An idle consumer (sleeping on the manual clock, which never moves) stops without waiting for it.
    const idle = runConsumer(f.queue, 'jobs', async () => ({ failed: [] }), { clock: f.clock, idleMs: 60_000 });
    await new Promise((r) => setTimeout(r, 10));
    await idle.stop();
  });
});
