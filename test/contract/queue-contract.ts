/**
 * The queue contract. Every adapter that can run it does (see queue.*.test.ts); what passes here behaves
 * like an SQS standard queue with the redrive policy of queues.ts, limits included. Standard queues do
 * not promise order, so order is asserted only when the adapter says it keeps one (`ordered`).
 */
import { describe, expect, it, beforeEach, afterEach } from 'vitest';
import type { Queue, QueueMessage } from '../../lambdas/engine/ports.js';
import type { ManualClock } from '../../lambdas/engine/clock.js';
import { EngineLimitError } from '../../lambdas/engine/errors.js';
import { QUEUES, deadLetterQueueName, type QueueName } from '../../lambdas/engine/queues.js';

export interface QueueFixture {
  queue: Queue;
  clock: ManualClock;
  cleanup(): Promise<void>;
}

export interface QueueContractOptions {
  /**
   * The adapter hands out the oldest visible messages first, and interleaves groups by turn (place in
   * the group + the group's messages in flight): the embedded queue does; SQS standard queues promise
   * no order, and their fair queues only approximate the interleaving.
   */
  ordered?: boolean;
}

const seconds = (s: number) => s * 1000;

export function queueContract(name: string, setup: () => Promise<QueueFixture>, options: QueueContractOptions = {}) {
  describe(`queue contract: ${name}`, () => {
    let f: QueueFixture;
    beforeEach(async () => {
      f = await setup();
    });
    afterEach(async () => f.cleanup());

    const receive = (queue: string, visibilitySeconds = 30, max = 10) => f.queue.receive(queue, { max, visibilitySeconds });
    const limitOf = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(EngineLimitError);
      return (err as EngineLimitError).limit;
    };
    /** Receives until nothing is visible, without deleting; returns everything leased. */
    const drain = async (queue: string, visibilitySeconds = 30) => {
      const all: QueueMessage[] = [];
      for (;;) {
        const batch = await receive(queue, visibilitySeconds);
        if (batch.length === 0) return all;
        all.push(...batch);
      }
    };

    it('sends, receives and deletes a message', async () => {
      const id = await f.queue.send('webhooks', 'hello');
      expect(typeof id).toBe('string');
      const [m, ...rest] = await receive('webhooks');
      expect(rest).toEqual([]);
      expect(m).toMatchObject({ id, body: 'hello', receiveCount: 1 });
      expect(typeof m.receipt).toBe('string');
      await f.queue.delete('webhooks', m.receipt);
      f.clock.advance(seconds(31));
      expect(await receive('webhooks')).toEqual([]);
    });

    it('keeps queues apart', async () => {
      await f.queue.send('webhooks', 'for webhooks');
      expect(await receive('jobs')).toEqual([]);
      expect(await receive(deadLetterQueueName('webhooks'))).toEqual([]);
      expect((await receive('webhooks')).map((m) => m.body)).toEqual(['for webhooks']);
    });

    it('hides a received message until its lease passes, counting receives', async () => {
      const id = await f.queue.send('webhooks', 'lease');
      expect((await receive('webhooks', 30)).map((m) => m.receiveCount)).toEqual([1]);
      expect(await receive('webhooks')).toEqual([]);
      f.clock.advance(seconds(29));
      expect(await receive('webhooks')).toEqual([]);
      f.clock.advance(seconds(2));
      const again = await receive('webhooks', 30);
      expect(again).toHaveLength(1);
      expect(again[0]).toMatchObject({ id, body: 'lease', receiveCount: 2 });
      f.clock.advance(seconds(31));
      expect((await receive('webhooks')).map((m) => m.receiveCount)).toEqual([3]);
    });

    it('gives each receive a fresh receipt', async () => {
      await f.queue.send('webhooks', 'r');
      const [a] = await receive('webhooks', 1);
      f.clock.advance(seconds(2));
      const [b] = await receive('webhooks', 1);
      expect(b.id).toBe(a.id);
      expect(b.receipt).not.toBe(a.receipt);
    });

    it('changeVisibility(0) releases a message at once; a longer one extends the lease', async () => {
      await f.queue.send('webhooks', 'release');
      const [m] = await receive('webhooks', 60);
      await f.queue.changeVisibility('webhooks', m.receipt, 0);
      const [again] = await receive('webhooks', 10);
      expect(again).toMatchObject({ id: m.id, receiveCount: 2 });

      await f.queue.changeVisibility('webhooks', again.receipt, 120);
      f.clock.advance(seconds(11));
      expect(await receive('webhooks')).toEqual([]);
      f.clock.advance(seconds(100));
      expect(await receive('webhooks')).toEqual([]);
      f.clock.advance(seconds(10));
      expect((await receive('webhooks')).map((x) => x.id)).toEqual([m.id]);
    });

    it('hides a delayed message until its delay passes', async () => {
      const id = await f.queue.send('jobs', 'later', { delaySeconds: 60 });
      await f.queue.send('jobs', 'now', { delaySeconds: 0 });
      const [now] = await receive('jobs');
      expect(now.body).toBe('now');
      await f.queue.delete('jobs', now.receipt);
      f.clock.advance(seconds(59));
      expect(await receive('jobs')).toEqual([]);
      f.clock.advance(seconds(2));
      const [m] = await receive('jobs');
      expect(m).toMatchObject({ id, body: 'later', receiveCount: 1 });
    });

    it('refuses a delay over 900 s', async () => {
      expect(await limitOf(f.queue.send('jobs', 'x', { delaySeconds: 901 }))).toBe('queue_delay');
      expect(await limitOf(f.queue.send('jobs', 'x', { delaySeconds: -1 }))).toBe('queue_delay');
      await f.queue.send('jobs', 'max delay', { delaySeconds: 900 });
      f.clock.advance(seconds(899));
      expect(await receive('jobs')).toEqual([]);
      f.clock.advance(seconds(2));
      expect((await receive('jobs')).map((m) => m.body)).toEqual(['max delay']);
    });

    it('refuses a body over 256 KiB, counting UTF-8 bytes', async () => {
      const max = 256 * 1024;
      await f.queue.send('jobs', 'x'.repeat(max));
      expect(await limitOf(f.queue.send('jobs', 'x'.repeat(max + 1)))).toBe('queue_message_size');
      expect(await limitOf(f.queue.send('jobs', 'é'.repeat(max / 2 + 1)))).toBe('queue_message_size');
      const got = await receive('jobs');
      expect(got.map((m) => m.body.length)).toEqual([max]);
    });

    it('refuses a group that SQS would refuse as a MessageGroupId', async () => {
      for (const group of ['', 'x'.repeat(129), 'has space', 'é', 'tab\t']) {
        expect(await limitOf(f.queue.send('jobs', 'x', { group })), JSON.stringify(group)).toBe('queue_group');
      }
      await f.queue.send('jobs', 'grouped', { group: `org_${'9'.repeat(124)}` });
      await f.queue.send('jobs', 'punctuation', { group: '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~' });
      expect((await receive('jobs')).map((m) => m.body).sort()).toEqual(['grouped', 'punctuation']);
    });

    it('delivers, leases and dead-letters grouped messages as any other', async () => {
      const id = await f.queue.send('jobs', 'poison', { group: 'org_a' });
      for (let i = 1; i <= QUEUES.jobs.maxReceives; i++) {
        const got = await receive('jobs', 10);
        expect(got.map((m) => [m.id, m.receiveCount])).toEqual([[id, i]]);
        f.clock.advance(seconds(11));
      }
      expect(await receive('jobs')).toEqual([]);
      expect((await receive(deadLetterQueueName('jobs'))).map((m) => m.id)).toEqual([id]);
    });

    it('refuses a batch outside 1..10 and a lease over 12 hours', async () => {
      expect(await limitOf(receive('jobs', 30, 0))).toBe('queue_batch');
      expect(await limitOf(receive('jobs', 30, 11))).toBe('queue_batch');
      expect(await limitOf(receive('jobs', 12 * 3600 + 1))).toBe('queue_visibility');
      await f.queue.send('jobs', 'm');
      const [m] = await receive('jobs', 30, 1);
      expect(await limitOf(f.queue.changeVisibility('jobs', m.receipt, 12 * 3600 + 1))).toBe('queue_visibility');
    });

    it('hands out at most `max` messages, each to one receiver while leased', async () => {
      const sent = new Set<string>();
      for (let i = 0; i < 15; i++) sent.add(await f.queue.send('jobs', `m${i}`));
      const first = await receive('jobs', 30, 10);
      expect(first.length).toBeGreaterThan(0);
      expect(first.length).toBeLessThanOrEqual(10);
      const all = [...first, ...(await drain('jobs'))];
      expect(all.map((m) => m.id).sort()).toEqual([...sent].sort());
      expect(new Set(all.map((m) => m.body)).size).toBe(15);
    });

    for (const queue of Object.keys(QUEUES) as QueueName[]) {
      const { maxReceives } = QUEUES[queue];
      it(`moves a ${queue} message received more than ${maxReceives} times to ${deadLetterQueueName(queue)}`, async () => {
        const id = await f.queue.send(queue, `poison-${queue}`);
        await f.queue.send(queue, 'healthy');
        const counts: number[] = [];
        for (let i = 0; i < maxReceives; i++) {
          const got = await receive(queue, 10);
          const poison = got.find((m) => m.id === id);
          expect(poison).toBeDefined();
          counts.push(poison!.receiveCount);
          for (const m of got) if (m.id !== id) await f.queue.delete(queue, m.receipt);
          f.clock.advance(seconds(11));
        }
        expect(counts).toEqual(Array.from({ length: maxReceives }, (_, i) => i + 1));
        expect(await receive(queue)).toEqual([]);
        const dead = await receive(deadLetterQueueName(queue));
        expect(dead.map((m) => ({ id: m.id, body: m.body }))).toEqual([{ id, body: `poison-${queue}` }]);
        await f.queue.delete(deadLetterQueueName(queue), dead[0].receipt);
        f.clock.advance(seconds(3600));
        expect(await receive(queue)).toEqual([]);
        expect(await receive(deadLetterQueueName(queue))).toEqual([]);
      });
    }

    it('does not delete with a stale receipt', async () => {
      const id = await f.queue.send('webhooks', 'stale');
      const [first] = await receive('webhooks', 10);
      f.clock.advance(seconds(11));
      const [second] = await receive('webhooks', 10);
      expect(second.id).toBe(id);
      await f.queue.delete('webhooks', first.receipt); // accepted, deletes nothing
      expect(await receive('webhooks')).toEqual([]);
      f.clock.advance(seconds(11));
      const [third] = await receive('webhooks', 10);
      expect(third).toMatchObject({ id, receiveCount: 3 });
      await f.queue.delete('webhooks', third.receipt);
      f.clock.advance(seconds(11));
      expect(await receive('webhooks')).toEqual([]);
    });

    it('refuses unknown queue names', async () => {
      await expect(f.queue.send('nope', 'x')).rejects.toThrow();
      await expect(receive('nope')).rejects.toThrow();
      await expect(f.queue.send(deadLetterQueueName(deadLetterQueueName('jobs')), 'x')).rejects.toThrow();
    });

    describe.skipIf(!options.ordered)('order', () => {
      it('hands out the oldest visible messages first', async () => {
        for (const body of ['a', 'b', 'c']) {
          await f.queue.send('jobs', body);
          f.clock.advance(1);
        }
        await f.queue.send('jobs', 'delayed', { delaySeconds: 5 });
        await f.queue.send('jobs', 'd');
        expect((await receive('jobs', 30, 2)).map((m) => m.body)).toEqual(['a', 'b']);
        expect((await receive('jobs', 30, 10)).map((m) => m.body)).toEqual(['c', 'd']);
        f.clock.advance(seconds(6));
        expect((await receive('jobs', 30, 10)).map((m) => m.body)).toEqual(['delayed']);
      });

      const sendAll = async (bodies: string[], group?: string) => {
        for (const body of bodies) {
          await f.queue.send('jobs', body, group === undefined ? {} : { group });
          f.clock.advance(1);
        }
      };

      it('interleaves two groups, each oldest first, whichever sent first', async () => {
        await sendAll(['a1', 'a2', 'a3', 'a4'], 'org_a');
        await sendAll(['b1', 'b2'], 'org_b');
        expect((await receive('jobs', 30, 10)).map((m) => m.body)).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'a4']);
      });

      it('a group with messages in flight yields to one with none, older messages or not', async () => {
        await sendAll(['a1', 'a2', 'a3', 'a4', 'a5'], 'org_a');
        expect((await receive('jobs', 30, 2)).map((m) => m.body)).toEqual(['a1', 'a2']);
        await sendAll(['b1', 'b2', 'b3'], 'org_b');
        // a3 is org_a's third turn (two in flight): org_b's first two come before it, its third after.
        const taken = await receive('jobs', 30, 3);
        expect(taken.map((m) => m.body)).toEqual(['b1', 'b2', 'a3']);
        // org_b's done: none of its in flight, org_a's three still are.
        for (const m of taken.slice(0, 2)) await f.queue.delete('jobs', m.receipt);
        expect((await receive('jobs', 30, 10)).map((m) => m.body)).toEqual(['b3', 'a4', 'a5']);
      });

      it('a message done frees its group turn; a delayed one does not count as in flight', async () => {
        await sendAll(['a1', 'a2', 'a3'], 'org_a');
        await f.queue.send('jobs', 'a-later', { group: 'org_a', delaySeconds: 60 });
        const [a1] = await receive('jobs', 30, 1);
        await sendAll(['b1', 'b2'], 'org_b');
        expect((await receive('jobs', 30, 1)).map((m) => m.body)).toEqual(['b1']);
        await f.queue.delete('jobs', a1.receipt);
        // org_a: none in flight (a1 done, a-later only delayed), so a2 is on its first turn and a3 on
        // its second, older than b2 (org_b's second: b1 is in flight).
        expect((await receive('jobs', 30, 3)).map((m) => m.body)).toEqual(['a2', 'a3', 'b2']);
      });

      it('a message without a group is a group of its own: never behind a backlog, and oldest first among its kind', async () => {
        await sendAll(['u1']);
        await sendAll(['a1', 'a2', 'a3'], 'org_a');
        await sendAll(['u2', 'u3']);
        expect((await receive('jobs', 30, 10)).map((m) => m.body)).toEqual(['u1', 'a1', 'u2', 'u3', 'a2', 'a3']);
      });

      it('a zero lease hands each message out once per receive, turns still interleaved', async () => {
        await sendAll(['a1', 'a2', 'a3'], 'org_a');
        await sendAll(['b1'], 'org_b');
        expect((await receive('jobs', 0, 10)).map((m) => m.body)).toEqual(['a1', 'b1', 'a2', 'a3']);
        expect((await receive('jobs', 0, 10)).map((m) => m.receiveCount)).toEqual([2, 2, 2, 2]);
      });

      it('does not let a retried message jump ahead of messages already waiting', async () => {
        await f.queue.send('jobs', 'retry');
        await receive('jobs', 10);
        await f.queue.send('jobs', 'waiting');
        f.clock.advance(seconds(11));
        expect((await receive('jobs', 30, 10)).map((m) => m.body)).toEqual(['waiting', 'retry']);
      });
    });
  });
}
