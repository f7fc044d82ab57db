/**
 * The embedded queue's fair receive (docs/decisions/knowledge-fairness.md) against a plain in-memory
 * model. fast-check draws sequences of: sends (to one of three groups, or with none; now or delayed),
 * receives (1 to 10 messages; a zero, short or long lease), deletes and lease changes by any receipt
 * handed out so far (stale ones included), and the clock moving on. The model takes messages one at a
 * time by the rule, re-reading the queue after each:
 *
 *   among the visible messages not yet taken by this receive, the least turn, then the oldest (visible
 *   since, then sent first); turn = the message's place among its group's such messages + its group's
 *   messages in flight (leased and not visible, or taken by this receive); a message with no group is
 *   a group of its own (turn 1); a message past its receives moves to the dead-letter queue instead.
 *
 * Every receive must hand out exactly the model's messages in the model's order, with its receive
 * counts; at the end the dead-letter queue holds exactly the model's dead messages.
 *
 * Replay a failure with FC_SEED=<seed> FC_PATH=<path> from fast-check's report.
 */
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { SqliteQueue } from '../../lambdas/engine/embedded/queue.js';
import { QUEUES, deadLetterQueueName } from '../../lambdas/engine/queues.js';

const QUEUE = 'jobs';
const MAX_RECEIVES = QUEUES.jobs.maxReceives;
const GROUPS = ['org_a', 'org_b', 'org_c', undefined] as const;

interface Message {
  seq: number;
  id: string;
  group: string | undefined;
  visibleAt: number;
  receipt: string | null;
  receiveCount: number;
  dead: boolean;
  deleted: boolean;
}

class Model {
  messages: Message[] = [];
  private seq = 0;

  send(id: string, group: string | undefined, now: number, delaySeconds: number) {
    this.messages.push({ seq: this.seq++, id, group, visibleAt: now + delaySeconds * 1000, receipt: null, receiveCount: 0, dead: false, deleted: false });
  }

  private live = () => this.messages.filter((m) => !m.dead && !m.deleted);

  /** The ids a receive takes, in order (receipts are the real queue's, set after). */
  receive(max: number, visibilitySeconds: number, now: number): Message[] {
    const out: Message[] = [];
    const taken = new Set<Message>();
    while (out.length < max) {
      const visible = this.live()
        .filter((m) => m.visibleAt <= now && !taken.has(m))
        .sort((x, y) => x.visibleAt - y.visibleAt || x.seq - y.seq);
      if (!visible.length) break;
      const turn = (m: Message) => {
        if (m.group === undefined) return 1;
        const place = visible.filter((v) => v.group === m.group).indexOf(m) + 1;
        const inFlight = this.live().filter((f) => f.group === m.group && ((f.receipt !== null && f.visibleAt > now) || taken.has(f))).length;
        return place + inFlight;
      };
      const next = visible.map((m) => ({ m, turn: turn(m) })).sort((x, y) => x.turn - y.turn || x.m.visibleAt - y.m.visibleAt || x.m.seq - y.m.seq)[0].m;
      if (next.receiveCount >= MAX_RECEIVES) {
        next.dead = true;
        next.receipt = null;
        continue;
      }
      next.receiveCount += 1;
      next.visibleAt = now + visibilitySeconds * 1000;
      taken.add(next);
      out.push(next);
    }
    return out;
  }

  delete(receipt: string) {
    const m = this.live().find((x) => x.receipt === receipt);
    if (m) m.deleted = true;
  }

  changeVisibility(receipt: string, seconds: number, now: number) {
    const m = this.live().find((x) => x.receipt === receipt && x.visibleAt > now);
    if (m) m.visibleAt = now + seconds * 1000;
  }
}

type Op =
  | { kind: 'send'; group: number; delay: 0 | 5 }
  | { kind: 'receive'; max: number; visibility: 0 | 1 | 30 }
  | { kind: 'delete'; receipt: number }
  | { kind: 'release'; receipt: number; seconds: 0 | 10 }
  | { kind: 'advance'; ms: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('send' as const), group: fc.nat(GROUPS.length - 1), delay: fc.constantFrom(0 as const, 0 as const, 5 as const) }), weight: 10 },
  { arbitrary: fc.record({ kind: fc.constant('receive' as const), max: fc.integer({ min: 1, max: 10 }), visibility: fc.constantFrom(0 as const, 1 as const, 30 as const, 30 as const) }), weight: 4 },
  { arbitrary: fc.record({ kind: fc.constant('delete' as const), receipt: fc.nat(50) }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('release' as const), receipt: fc.nat(50), seconds: fc.constantFrom(0 as const, 10 as const) }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 40_000 }) }), weight: 2 },
);

it('a receive takes groups in turn exactly as the model says', { timeout: 120_000 }, async () => {
  const env = process.env;
  const seed = env.FC_SEED ? Number(env.FC_SEED) : (Date.now() ^ (Math.random() * 0x100000000)) | 0;
  let receives = 0;
  let interleaved = 0;
  let deadLettered = 0;
  const property = fc.asyncProperty(fc.array(op, { minLength: 20, maxLength: 80 }), async (ops) => {
    const db = new Database(':memory:');
    try {
      const clock = new ManualClock();
      const queue = new SqliteQueue(db, clock);
      const model = new Model();
      const receipts: string[] = [];
      let bodies = 0;
      for (const o of ops) {
        const now = clock.now();
        if (o.kind === 'send') {
          const group = GROUPS[o.group];
          const body = `m${bodies++}`;
          const id = await queue.send(QUEUE, body, { ...(group ? { group } : {}), ...(o.delay ? { delaySeconds: o.delay } : {}) });
          model.send(id, group, now, o.delay);
        } else if (o.kind === 'receive') {
          const got = await queue.receive(QUEUE, { max: o.max, visibilitySeconds: o.visibility });
          const expected = model.receive(o.max, o.visibility, now);
          expect(got.map((m) => [m.id, m.receiveCount])).toEqual(expected.map((m) => [m.id, m.receiveCount]));
          got.forEach((m, i) => {
            expected[i].receipt = m.receipt;
            receipts.push(m.receipt);
          });
          receives++;
          if (new Set(expected.map((m) => m.group ?? m.id)).size > 1) interleaved++;
        } else if (o.kind === 'delete' || o.kind === 'release') {
          if (!receipts.length) continue;
          const receipt = receipts[o.receipt % receipts.length];
          if (o.kind === 'delete') {
            await queue.delete(QUEUE, receipt);
            model.delete(receipt);
          } else {
            await queue.changeVisibility(QUEUE, receipt, o.seconds);
            model.changeVisibility(receipt, o.seconds, now);
          }
        } else {
          clock.advance(o.ms);
        }
      }
      // The dead-letter queue holds the model's dead messages, each once.
      const dead: string[] = [];
      for (let batch; (batch = await queue.receive(deadLetterQueueName(QUEUE), { max: 10, visibilitySeconds: 60 })).length; ) dead.push(...batch.map((m) => m.id));
      expect(dead.sort()).toEqual(model.messages.filter((m) => m.dead).map((m) => m.id).sort());
      deadLettered += dead.length;
    } finally {
      db.close();
    }
  });
  await fc.assert(property, { numRuns: env.FC_RUNS ? Number(env.FC_RUNS) : 500, seed, path: env.FC_PATH });
  console.log(`queue fairness model: seed ${seed}, ${receives} receives, ${interleaved} of them across groups, ${deadLettered} messages dead-lettered`);
});
