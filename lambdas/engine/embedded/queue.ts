/**
 * Queue on SQLite (better-sqlite3), shaped like SQS standard queues with a redrive policy: visibility
 * leases, per-receive receipts, message timers, and a dead-letter queue per entry of QUEUES. Time comes
 * from the clock only, so tests drive leases and delays with a ManualClock.
 *
 * Fair across groups (SQS fair queues, docs/decisions/knowledge-fairness.md): a receive takes each
 * group's visible messages oldest first, and interleaves the groups by turn = the message's place in
 * its group + the group's messages in flight, then by age. So a group with a backlog and messages in
 * flight yields to one with none, and a queue whose messages carry no group (each is a group of its
 * own, as in SQS) is served oldest first, as before groups existed.
 *
 * `runConsumer` is the local stand-in for the SQS -> Lambda event source mapping.
 */
import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { GroupCommit } from './group-commit.js';
import type { Clock, Queue, QueueConsumer, QueueMessage, QueueSendOptions } from '../ports.js';
import { assertQueueReceive, assertQueueSend, assertQueueVisibility } from '../adapter-kit/queue-checks.js';
import { LIMITS } from '../limits.js';
import { QUEUES, deadLetterQueueName, type QueueDef } from '../queues.js';

/** The redrive policy of a queue name: its definition for a source queue, null for a dead-letter queue. */
function resolveQueue(name: string): { def: QueueDef; dead: string } | null {
  if (Object.hasOwn(QUEUES, name)) return { def: QUEUES[name as keyof typeof QUEUES], dead: deadLetterQueueName(name) };
  if (Object.keys(QUEUES).some((q) => deadLetterQueueName(q) === name)) return null;
  throw new Error(`unknown queue: ${name}`);
}

// ---------- SQLite queue ----------

const SCHEMA = `
CREATE TABLE IF NOT EXISTS queue_messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  queue TEXT NOT NULL,
  body TEXT NOT NULL,
  sent_at INTEGER NOT NULL,
  visible_at INTEGER NOT NULL,
  receive_count INTEGER NOT NULL DEFAULT 0,
  receipt TEXT,
  grp TEXT
);
CREATE INDEX IF NOT EXISTS queue_messages_visible ON queue_messages (queue, visible_at, seq);
CREATE INDEX IF NOT EXISTS queue_messages_receipt ON queue_messages (receipt) WHERE receipt IS NOT NULL;
`;

/** Made after the migration: a database from before groups gets its column first. */
const GROUP_INDEXES = `
CREATE INDEX IF NOT EXISTS queue_messages_group ON queue_messages (queue, grp, visible_at, seq);
CREATE INDEX IF NOT EXISTS queue_messages_in_flight ON queue_messages (queue, grp, visible_at) WHERE receipt IS NOT NULL;
`;

/** A database made before messages had groups: its messages are each a group of their own (NULL). */
function addGroupColumn(db: Database.Database): void {
  const columns = db.prepare<[], { name: string }>('PRAGMA table_info(queue_messages)').all();
  if (columns.some((c) => c.name === 'grp')) return;
  try {
    db.exec('ALTER TABLE queue_messages ADD COLUMN grp TEXT');
  } catch (error) {
    // Another process opening the same file added it first.
    if (!/duplicate column/i.test(String(error))) throw error;
  }
}

/**
 * Per group of the queue, its oldest visible messages (up to @max, as [seq, visible_at]) and how many
 * of its messages are in flight. The groups are found by skipping through the group index (one seek
 * each), and each group's head is read from the same index, so the cost grows with the groups and
 * @max, not with the backlog: 10,000 messages of one group cost what 10 do.
 */
const GROUP_HEADS = `
WITH RECURSIVE groups(g) AS (
  SELECT (SELECT grp FROM queue_messages WHERE queue = @queue AND grp IS NOT NULL ORDER BY grp LIMIT 1)
  UNION ALL
  SELECT (SELECT grp FROM queue_messages WHERE queue = @queue AND grp > groups.g ORDER BY grp LIMIT 1) FROM groups WHERE groups.g IS NOT NULL
)
SELECT groups.g AS grp,
  (SELECT json_group_array(json_array(seq, visible_at) ORDER BY visible_at, seq) FROM (
    SELECT seq, visible_at FROM queue_messages WHERE queue = @queue AND grp = groups.g AND visible_at <= @now ORDER BY visible_at, seq LIMIT @max
  )) AS head,
  (SELECT COUNT(*) FROM queue_messages WHERE queue = @queue AND grp = groups.g AND receipt IS NOT NULL AND visible_at > @now) AS in_flight
FROM groups WHERE groups.g IS NOT NULL`;

interface Row {
  seq: number;
  id: string;
  body: string;
  receive_count: number;
}

/** A visible message in line for a receive: its turn among the groups, then its age. */
interface Candidate {
  seq: number;
  /** null: sent without a group (a group of its own). */
  group: string | null;
  turn: number;
  visible_at: number;
}

export class SqliteQueue implements Queue {
  private readonly stmt;

  /** `writer`: the key-value store's group commit on the same file (one write-lock take for both per turn). */
  constructor(
    private readonly db: Database.Database,
    private readonly clock: Clock,
    private readonly writer: GroupCommit = new GroupCommit(db),
  ) {
    db.exec(SCHEMA);
    addGroupColumn(db);
    db.exec(GROUP_INDEXES);
    this.stmt = {
      insert: db.prepare(
        `INSERT INTO queue_messages (id, queue, body, sent_at, visible_at, receive_count, receipt, grp)
         VALUES (@id, @queue, @body, @now, @visible_at, 0, NULL, @group)`,
      ),
      // Is anything visible? An idle receiver's cheap look before it takes the write lock.
      anyVisible: db.prepare<[string, number], { seq: number }>('SELECT seq FROM queue_messages WHERE queue = ? AND visible_at <= ? LIMIT 1'),
      groupHeads: db.prepare<{ queue: string; now: number; max: number }, { grp: string; head: string; in_flight: number }>(GROUP_HEADS),
      // Messages sent without a group: each a group of its own, so always on its first turn.
      ungrouped: db.prepare<{ queue: string; now: number; max: number }, { seq: number; visible_at: number }>(
        `SELECT seq, visible_at FROM queue_messages WHERE queue = @queue AND grp IS NULL AND visible_at <= @now ORDER BY visible_at, seq LIMIT @max`,
      ),
      backlog: db.prepare<[string, number], { waiting: number; oldest: number | null }>('SELECT COUNT(*) AS waiting, MIN(visible_at) AS oldest FROM queue_messages WHERE queue = ? AND visible_at <= ?'),
      rows: db.prepare<[string], Row>('SELECT seq, id, body, receive_count FROM queue_messages WHERE seq IN (SELECT value FROM json_each(?))'),
      lease: db.prepare('UPDATE queue_messages SET receive_count = receive_count + 1, receipt = ?, visible_at = ? WHERE seq = ?'),
      // Moved as SQS moves it: same id and body, receive count kept, visible at once in the dead-letter queue.
      redrive: db.prepare('UPDATE queue_messages SET queue = ?, receipt = NULL, visible_at = ? WHERE seq = ?'),
      delete: db.prepare('DELETE FROM queue_messages WHERE queue = ? AND receipt = ?'),
      // Only a message still in flight under this receipt (SQS answers MessageNotInflight otherwise).
      changeVisibility: db.prepare('UPDATE queue_messages SET visible_at = ? WHERE queue = ? AND receipt = ? AND visible_at > ?'),
    };
  }

  async send(queue: string, body: string, options: QueueSendOptions = {}): Promise<string> {
    resolveQueue(queue);
    assertQueueSend(body, options.delaySeconds, options.group);
    const id = randomUUID();
    const now = this.clock.now();
    await this.writer.run(() =>
      this.stmt.insert.run({ id, queue, body, now, visible_at: now + (options.delaySeconds ?? 0) * 1000, group: options.group ?? null }),
    );
    return id;
  }

  /**
   * The visible messages a receive takes next (up to `max`), in order: by turn (place among its group's
   * visible messages + the group's messages in flight), then oldest first. Taking them in this order is
   * taking, one at a time, the message of least turn: a message taken puts its group's next one a place
   * forward and one more in flight. `taken`: what this receive took already, by group; under a zero
   * lease still visible, so read past and counted as in flight as a longer lease would be.
   */
  private nextInLine(queue: string, now: number, max: number, taken: Map<number, string | null>, zeroLease: boolean): Candidate[] {
    const per = max + taken.size;
    const takenIn = new Map<string, number>();
    if (zeroLease) for (const group of taken.values()) if (group !== null) takenIn.set(group, (takenIn.get(group) ?? 0) + 1);
    const line: Candidate[] = [];
    for (const { grp, head, in_flight } of this.stmt.groupHeads.all({ queue, now, max: per })) {
      let place = 0;
      for (const [seq, visible_at] of JSON.parse(head) as [number, number][]) {
        if (!taken.has(seq)) line.push({ seq, group: grp, visible_at, turn: ++place + in_flight + (takenIn.get(grp) ?? 0) });
      }
    }
    for (const { seq, visible_at } of this.stmt.ungrouped.all({ queue, now, max: per })) {
      if (!taken.has(seq)) line.push({ seq, group: null, visible_at, turn: 1 });
    }
    line.sort((a, b) => a.turn - b.turn || a.visible_at - b.visible_at || a.seq - b.seq);
    return line.slice(0, max);
  }

  async receive(queue: string, options: { max: number; visibilitySeconds: number }): Promise<QueueMessage[]> {
    const policy = resolveQueue(queue);
    assertQueueReceive(options);
    // An idle receiver polls often: look first with a read, which takes no write lock from the writers.
    if (!this.stmt.anyVisible.get(queue, this.clock.now())) return [];
    return this.writer.run(() => {
        const now = this.clock.now();
        const out: QueueMessage[] = [];
        const taken = new Map<number, string | null>();
        while (out.length < options.max) {
          const line = this.nextInLine(queue, now, options.max - out.length, taken, options.visibilitySeconds === 0);
          if (line.length === 0) break;
          const rows = new Map(this.stmt.rows.all(JSON.stringify(line.map((c) => c.seq))).map((r) => [r.seq, r]));
          for (const { seq, group } of line) {
            const row = rows.get(seq)!;
            if (policy && row.receive_count >= policy.def.maxReceives) {
              // Moved on, not taken: the turns behind it in its group move up, so the line is read again.
              this.stmt.redrive.run(policy.dead, now, row.seq);
              break;
            }
            const receipt = randomUUID();
            this.stmt.lease.run(receipt, now + options.visibilitySeconds * 1000, row.seq);
            taken.set(row.seq, group);
            out.push({ id: row.id, body: row.body, receipt, receiveCount: row.receive_count + 1 });
          }
        }
        return out;
      });
  }

  /** A receipt that is no longer the latest (the message was received again) deletes nothing, as in SQS. */
  async delete(queue: string, receipt: string): Promise<void> {
    resolveQueue(queue);
    await this.writer.run(() => this.stmt.delete.run(queue, receipt));
  }

  /** A stale receipt or a message whose lease already ran out is left alone. */
  async changeVisibility(queue: string, receipt: string, visibilitySeconds: number): Promise<void> {
    resolveQueue(queue);
    assertQueueVisibility(visibilitySeconds);
    const now = this.clock.now();
    await this.writer.run(() => this.stmt.changeVisibility.run(now + visibilitySeconds * 1000, queue, receipt, now));
  }

  /**
   * What waits in `queue` now: the messages a receive could take, and how long the one deliverable
   * longest has waited (0 when none). For the local server's readiness (lambdas/local/ops-server.ts);
   * SQS reports the same as ApproximateNumberOfMessagesVisible and ApproximateAgeOfOldestMessage.
   */
  backlog(queue: string): { waiting: number; oldestWaitSeconds: number } {
    const now = this.clock.now();
    const row = this.stmt.backlog.get(queue, now)!;
    return { waiting: row.waiting, oldestWaitSeconds: row.oldest === null ? 0 : Math.max(0, Math.floor((now - row.oldest) / 1000)) };
  }
}

// ---------- local consumer (stand-in for the SQS event source mapping) ----------

export interface ConsumerOptions {
  clock: Clock;
  /** Pause after an empty receive (or an error), ms. Default 1000. */
  idleMs?: number;
  /** Lease per batch, seconds. Default: the queue's `localLeaseSeconds` from QUEUES (a local receiver). */
  visibilitySeconds?: number;
  /** Messages per batch, 1..10. Default 10. */
  batch?: number;
  /** Receive, delete and consumer errors. Default: console.error. */
  onError?: (error: unknown) => void;
}

/**
 * Polls `name`, hands each batch to the consumer, deletes the messages not reported as failed and
 * leaves the failed ones to reappear when their lease ends (redrive applies as in SQS). As with a
 * Lambda, a consumer that throws, or reports an id not in the batch, fails the whole batch.
 */
export function runConsumer(queue: Queue, name: string, consumer: QueueConsumer, options: ConsumerOptions): { stop(): Promise<void> } {
  const idleMs = options.idleMs ?? 1000;
  const batch = options.batch ?? LIMITS.queueMaxReceive;
  const def = Object.hasOwn(QUEUES, name) ? QUEUES[name as keyof typeof QUEUES] : undefined;
  const visibilitySeconds = options.visibilitySeconds ?? def?.localLeaseSeconds ?? 30;
  assertQueueReceive({ max: batch, visibilitySeconds });
  const onError = options.onError ?? ((e: unknown) => console.error(`queue consumer ${name}:`, e));

  let stopped = false;
  let wake!: () => void;
  const stopping = new Promise<void>((resolve) => (wake = resolve));
  const idle = () => Promise.race([options.clock.sleep(idleMs), stopping]);

  const loop = async () => {
    while (!stopped) {
      let messages: QueueMessage[];
      try {
        messages = await queue.receive(name, { max: batch, visibilitySeconds });
      } catch (e) {
        onError(e);
        await idle();
        continue;
      }
      if (messages.length === 0) {
        await idle();
        continue;
      }
      let failed: Set<string>;
      try {
        const result = await consumer(messages);
        failed = new Set(result.failed);
        const ids = new Set(messages.map((m) => m.id));
        if ([...failed].some((id) => !ids.has(id))) failed = ids;
      } catch (e) {
        onError(e);
        failed = new Set(messages.map((m) => m.id));
      }
      for (const m of messages) {
        if (failed.has(m.id)) continue;
        try {
          await queue.delete(name, m.receipt);
        } catch (e) {
          onError(e);
        }
      }
    }
  };
  const running = loop();

  return {
    async stop() {
      stopped = true;
      wake();
      await running;
    },
  };
}
