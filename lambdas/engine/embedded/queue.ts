/**
 * Queue on SQLite (better-sqlite3), shaped like SQS standard queues with a redrive policy: visibility
 * leases, per-receive receipts, message timers, and a dead-letter queue per entry of QUEUES. Time comes
 * from the clock only, so tests drive leases and delays with a ManualClock.
 *
 * `runConsumer` is the local stand-in for the SQS -> Lambda event source mapping.
 */
import { randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { GroupCommit } from './group-commit.js';
import type { Clock, Queue, QueueConsumer, QueueMessage } from '../ports.js';
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
  receipt TEXT
);
CREATE INDEX IF NOT EXISTS queue_messages_visible ON queue_messages (queue, visible_at, seq);
CREATE INDEX IF NOT EXISTS queue_messages_receipt ON queue_messages (receipt) WHERE receipt IS NOT NULL;
`;

interface Row {
  seq: number;
  id: string;
  body: string;
  receive_count: number;
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
    this.stmt = {
      insert: db.prepare(
        `INSERT INTO queue_messages (id, queue, body, sent_at, visible_at, receive_count, receipt)
         VALUES (@id, @queue, @body, @now, @visible_at, 0, NULL)`,
      ),
      // Visible messages, oldest lease expiry / timer first, skipping those already leased in this receive.
      visible: db.prepare<[string, number, string, number], Row>(
        `SELECT seq, id, body, receive_count FROM queue_messages
         WHERE queue = ? AND visible_at <= ? AND seq NOT IN (SELECT value FROM json_each(?))
         ORDER BY visible_at, seq LIMIT ?`,
      ),
      lease: db.prepare('UPDATE queue_messages SET receive_count = receive_count + 1, receipt = ?, visible_at = ? WHERE seq = ?'),
      // Moved as SQS moves it: same id and body, receive count kept, visible at once in the dead-letter queue.
      redrive: db.prepare('UPDATE queue_messages SET queue = ?, receipt = NULL, visible_at = ? WHERE seq = ?'),
      delete: db.prepare('DELETE FROM queue_messages WHERE queue = ? AND receipt = ?'),
      // Only a message still in flight under this receipt (SQS answers MessageNotInflight otherwise).
      changeVisibility: db.prepare('UPDATE queue_messages SET visible_at = ? WHERE queue = ? AND receipt = ? AND visible_at > ?'),
    };
  }

  async send(queue: string, body: string, options: { delaySeconds?: number } = {}): Promise<string> {
    resolveQueue(queue);
    assertQueueSend(body, options.delaySeconds);
    const id = randomUUID();
    const now = this.clock.now();
    await this.writer.run(() => this.stmt.insert.run({ id, queue, body, now, visible_at: now + (options.delaySeconds ?? 0) * 1000 }));
    return id;
  }

  async receive(queue: string, options: { max: number; visibilitySeconds: number }): Promise<QueueMessage[]> {
    const policy = resolveQueue(queue);
    assertQueueReceive(options);
    // An idle receiver polls often: look first with a read, which takes no write lock from the writers.
    if (this.stmt.visible.all(queue, this.clock.now(), '[]', 1).length === 0) return [];
    return this.writer.run(() => {
        const now = this.clock.now();
        const out: QueueMessage[] = [];
        const leased: number[] = [];
        while (out.length < options.max) {
          const rows = this.stmt.visible.all(queue, now, JSON.stringify(leased), options.max - out.length);
          if (rows.length === 0) break;
          for (const row of rows) {
            if (policy && row.receive_count >= policy.def.maxReceives) {
              this.stmt.redrive.run(policy.dead, now, row.seq);
              continue;
            }
            const receipt = randomUUID();
            this.stmt.lease.run(receipt, now + options.visibilitySeconds * 1000, row.seq);
            leased.push(row.seq);
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
}

// ---------- local consumer (stand-in for the SQS event source mapping) ----------

export interface ConsumerOptions {
  clock: Clock;
  /** Pause after an empty receive (or an error), ms. Default 1000. */
  idleMs?: number;
  /** Lease per batch, seconds. Default: the queue's `visibilitySeconds` from QUEUES. */
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
  const visibilitySeconds = options.visibilitySeconds ?? def?.visibilitySeconds ?? 30;
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
