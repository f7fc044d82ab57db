/**
 * Pull and ack (spec 4.21, 3): a pull or stream subscription's messages wait in its inbox, oldest
 * first. A pull leases up to `max` visible messages for `lease_seconds` (each lease is a conditional
 * update on the lease it saw, so two pullers never lease one message), counting `delivery_count`; an
 * unacknowledged message is visible again once its lease ends. Waiting and leased messages are kept
 * apart by two indexes (keys.ts): a pull reads the leases that ended and the waiting messages, never
 * the leases still held, so its cost does not grow with what is leased. An ack deletes a message only
 * under a lease that holds now (and, given its `lease_id`, only that lease), in one transaction with
 * the counters it moves.
 */
import type { Engine, KvItem } from '../engine/ports.js';
import { ConditionFailedError, TransactionCanceledError } from '../engine/errors.js';
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseBody } from '../shared/validate.js';
import { inboxKey, inboxPartition, leasedIndex, leaseEnd, waitingIndex } from './keys.js';
import { countWrite } from './stats.js';
import { envelopeShape } from './envelope.js';

export const PULL_MAX = { min: 1, max: 100, default: 10 };
export const LEASE_SECONDS = { min: 5, max: 300, default: 30 };
export const MAX_ACK_IDS = 100;

/**
 * Only pull and websocket subscriptions have an inbox to pull, acknowledge or stream; a webhook or an
 * eventbridge subscription is delivered by the platform: 409 wrong_delivery_mode.
 */
export function requireInbox(subscription: { delivery: { mode: string } }, what: 'pulled' | 'acknowledged' | 'streamed'): void {
  const mode = subscription.delivery.mode;
  if (mode === 'pull' || mode === 'websocket') return;
  const delivered = mode === 'webhook' ? 'to its URL' : mode === 'eventbridge' ? 'to its event bus' : 'by the platform';
  throw new PlatformError('wrong_delivery_mode', `A ${mode} subscription is delivered ${delivered}; only pull and websocket subscriptions are ${what}.`);
}
/** Index pages one pull reads at most (entries another puller took meanwhile are skipped). */
const MAX_PAGES = 10;
/** An ack names an event id, or a message's `lease_id` (`<event_id>.<delivery_count>`): that lease only. */
const ACK_ID_PATTERN = /^evt_[0-9a-z]{26}(?:\.[1-9][0-9]{0,8})?$/;

export type PullMessage = Record<string, unknown> & { event_id: string; delivery_count: number; lease_id: string };

/**
 * A pulled message as a stream frame: the envelope and its delivery_count, as before leases had ids.
 * The stream session remembers each frame's lease itself, and a client acks a frame by its event id.
 */
export function frameOf(message: PullMessage): Record<string, unknown> {
  const { lease_id: _lease, ...frame } = message;
  return frame;
}
/** Why an acked id removed nothing (see ack()). */
export const NOT_ACKED_REASONS = ['not_found', 'not_leased', 'lease_expired', 'stale_lease'] as const;
export type NotAckedReason = (typeof NOT_ACKED_REASONS)[number];

/** The answers' schemas, built at their first use. */
const answerSchemas = onFirstUse(() => {
  const message = z
    .strictObject({
      ...envelopeShape(),
      delivery_count: z.int().check(z.minimum(1), z.describe('How many times it was leased, this lease included (1 the first time).')),
      lease_id: z.string().check(z.describe('`<event_id>.<delivery_count>`: acknowledges this lease only.')),
    })
    .check(z.meta({ id: 'PullMessage', description: 'The Event envelope, with its delivery_count and lease_id.' }));
  return {
    pull: z.strictObject({ messages: z.array(message).check(z.describe('Oldest first; each hidden until its lease ends.')) }),
    ack: z.strictObject({
      acked: z.int().check(z.minimum(0), z.describe('How many messages were removed.')),
      not_acked: z
        .array(
          z.strictObject({
            id: z.string(),
            reason: z.enum(NOT_ACKED_REASONS).check(
              z.describe('`not_found`: not in this inbox (another subscription\'s, acked already, unknown); `not_leased`: waiting, never leased; `lease_expired`: its lease ended and it waits again; `stale_lease`: leased again since that lease_id.'),
            ),
          }),
        )
        .check(z.describe('Each id that removed nothing, with why.')),
    }),
  };
});

/** POST .../pull's answer. */
export const pullAnswerSchema = () => answerSchemas().pull;
/** POST .../ack's answer. */
export const ackAnswerSchema = () => answerSchemas().ack;
export type AckAnswer = z.output<ReturnType<typeof ackAnswerSchema>>;

/** The request schemas, built at their first use (onFirstUse): only pull and ack calls need them. */
const inboxSchemas = onFirstUse(() => {
  const whole = (range: { min: number; max: number; default: number }, name: string, description: string) => {
    const message = `${name} is a whole number from ${range.min} to ${range.max}.`;
    return z._default(z.number({ error: message }).check(z.int(message), z.minimum(range.min, message), z.maximum(range.max, message), z.describe(description)), range.default);
  };
  const pullBody = z.strictObject({
    max: whole(PULL_MAX, 'max', 'Most messages to lease.'),
    lease_seconds: whole(LEASE_SECONDS, 'lease_seconds', 'How long the messages stay leased before they are visible again.'),
  });
  const ids = `ids is an array of 1 to ${MAX_ACK_IDS} event ids.`;
  const ackBody = z.strictObject({
    ids: z.array(z.unknown(), { error: ids }).check(
      z.minLength(1, ids),
      z.maxLength(MAX_ACK_IDS, ids),
      // One code for any id that is not one (a number, null, a forged lease id): invalid_id, naming `ids`.
      z.refine((list) => list.every((id) => typeof id === 'string' && ACK_ID_PATTERN.test(id)), {
        message: 'An id is an event id ("evt_" and 26 characters) or a message\'s lease_id.',
        params: { code: 'invalid_id' },
      }),
      z.describe('Event ids, or lease_ids (`<event_id>.<delivery_count>`) to acknowledge only that lease.'),
    ),
  });
  return { pullBody, ackBody };
});

/** POST .../pull's body: `{max?, lease_seconds?}`; none, `{}` or `null` takes the defaults. */
export const pullBodySchema = () => inboxSchemas().pullBody;
/** POST .../ack's body: `{ids: [...]}`. */
export const ackBodySchema = () => inboxSchemas().ackBody;

/** A pull's body: a `max` or `lease_seconds` out of range is 400 invalid_limit. */
export function parsePull(body: unknown): { max: number; leaseSeconds: number } {
  const { max, lease_seconds } = parseBody(pullBodySchema(), body ?? {}, { unknownField: 'unknown_field', fieldCodes: { max: 'invalid_limit', lease_seconds: 'invalid_limit' } });
  return { max, leaseSeconds: lease_seconds };
}

/** An ack's body: the ids, each once. */
export function parseAck(body: unknown): string[] {
  const { ids } = parseBody(ackBodySchema(), body ?? null, { unknownField: 'unknown_field' });
  return [...new Set(ids as string[])];
}

/**
 * Leases up to `max` visible messages, oldest first: ended leases and waiting messages, never held ones.
 * `holder`: who leases them (a stream's connection), recorded on each lease so that its acks by event id
 * acknowledge only its own leases (a client acks a frame by its event id; it never sees the lease_id).
 */
export async function pull(engine: Engine, subscriptionId: string, max: number, leaseSeconds: number, holder?: string): Promise<PullMessage[]> {
  const out: PullMessage[] = [];
  const now = engine.clock.now();
  const until = now + leaseSeconds * 1000;
  await returnEndedLeases(engine, subscriptionId, now);
  // Oldest first: the waiting index is in event id order, and an event id sorts by publish time.
  const waiting = { index: 'gsi1' as const, pk: waitingIndex(subscriptionId, '').gsi1pk, limit: Math.min(100, max * 2) };
  let page = await engine.kv.query(waiting);
  for (let pages = 0; pages < MAX_PAGES; pages++) {
    for (const item of page.items) {
      if (out.length >= max) return out;
      const leased = await lease(engine, subscriptionId, item, until, holder);
      if (leased) {
        const delivery_count = Number(leased.delivery_count);
        out.push({ ...(JSON.parse(String(leased.envelope)) as Record<string, unknown>), delivery_count, lease_id: `${leased.sk}.${delivery_count}` } as PullMessage);
      }
    }
    if (out.length >= max || !page.cursor) break;
    page = await engine.kv.query({ ...waiting, cursor: page.cursor });
  }
  return out;
}

/**
 * Spec 3: a lease that ends without an ack returns the message to the inbox. Each pull first moves the
 * leases ended by now back into the waiting index (each lease end is moved once, by whichever pull sees
 * it first), so what it then takes is the oldest waiting, whichever lease ended first; leases still
 * held are never read. At most MAX_PAGES pages a pull, so one pull's work stays bounded: past 1,000
 * leases ended at once, the next pulls move the rest.
 */
async function returnEndedLeases(engine: Engine, subscriptionId: string, now: number): Promise<void> {
  const ended = { index: 'gsi2' as const, pk: leasedIndex(subscriptionId, 0, '').gsi2pk, sk: { lt: leaseEnd(now + 1) }, limit: 100 };
  let page = await engine.kv.query(ended);
  for (let pages = 1; ; pages++) {
    await Promise.all(
      page.items.map(async (item) => {
        try {
          await engine.kv.update({
            key: { pk: item.pk, sk: item.sk },
            set: waitingIndex(subscriptionId, String(item.sk)),
            remove: ['gsi2pk', 'gsi2sk'],
            condition: { ifEquals: { visible_at: item.visible_at ?? 0 } },
          });
        } catch (error) {
          // Leased again, acked or moved by another pull meanwhile.
          if (!(error instanceof ConditionFailedError)) throw error;
        }
      }),
    );
    if (!page.cursor || pages >= MAX_PAGES) return;
    page = await engine.kv.query({ ...ended, cursor: page.cursor });
  }
}

/** Leases a message: out of the waiting index, into the leased one by its lease's end. */
async function lease(engine: Engine, subscriptionId: string, item: KvItem, until: number, holder?: string): Promise<KvItem | undefined> {
  try {
    return await engine.kv.update({
      key: { pk: item.pk, sk: item.sk },
      set: { visible_at: until, ...leasedIndex(subscriptionId, until, item.sk), ...(holder === undefined ? {} : { lease_holder: holder }) },
      add: { delivery_count: 1 },
      remove: ['gsi1pk', 'gsi1sk', ...(holder === undefined ? ['lease_holder'] : [])],
      condition: { ifEquals: { visible_at: item.visible_at ?? 0 } },
    });
  } catch (error) {
    // Another puller leased it, or it was acked, meanwhile.
    if (error instanceof ConditionFailedError) return undefined;
    throw error;
  }
}

/**
 * Acknowledges the named messages of this subscription: each is deleted only while a lease on it holds
 * (given a `lease_id`, only that lease; given a `holder`, only a lease it holds), with the counters in
 * the same transaction. Every id not
 * acknowledged is in `not_acked` with why: `not_found` (not in this inbox: another subscription's,
 * acked already, or never), `not_leased` (waiting, never leased), `lease_expired` (its lease ended),
 * `stale_lease` (leased again since that lease_id).
 */
export async function ack(engine: Engine, workspaceId: string, subscriptionId: string, ids: string[], holder?: string): Promise<AckAnswer> {
  const results = await Promise.all(ids.map(async (id) => ({ id, reason: await ackOne(engine, workspaceId, subscriptionId, id, holder) })));
  return { acked: results.filter((r) => r.reason === undefined).length, not_acked: results.filter((r): r is AckAnswer['not_acked'][number] => r.reason !== undefined) };
}

async function ackOne(engine: Engine, workspaceId: string, subscriptionId: string, id: string, holder?: string): Promise<NotAckedReason | undefined> {
  const [eventId, count] = id.split('.');
  for (let attempt = 0; attempt < 5; attempt++) {
    const item = await engine.kv.get(inboxKey(subscriptionId, eventId));
    if (!item) return 'not_found';
    const deliveries = Number(item.delivery_count ?? 0);
    if (!deliveries) return 'not_leased';
    if (count !== undefined && Number(count) !== deliveries) return 'stale_lease';
    // A holder acks only its own lease: another consumer has leased the message since.
    if (holder !== undefined && item.lease_holder !== holder) return 'stale_lease';
    if (!(typeof item.visible_at === 'number' && item.visible_at > engine.clock.now())) return 'lease_expired';
    try {
      await engine.kv.transact([
        { delete: inboxKey(subscriptionId, eventId), condition: { ifEquals: { delivery_count: item.delivery_count!, visible_at: item.visible_at } } },
        countWrite(workspaceId, eventId, { completed: 1, depth: -1 })!,
      ]);
      return undefined;
    } catch (error) {
      // Leased again or acked meanwhile: look again.
      if (!(error instanceof TransactionCanceledError && error.failed.includes(0))) throw error;
    }
  }
  return 'stale_lease';
}

/**
 * Removes every message of a subscription's inbox (it was deleted), each with its depth, a
 * conditional delete so that an ack or another removal at once counts it once.
 */
export async function removeInbox(engine: Engine, workspaceId: string, subscriptionId: string, eventIds?: string[]): Promise<void> {
  const removeOne = async (eventId: string) => {
    try {
      await engine.kv.transact([{ delete: inboxKey(subscriptionId, eventId), condition: { ifExists: true } }, countWrite(workspaceId, eventId, { depth: -1 })!]);
    } catch (error) {
      if (!(error instanceof TransactionCanceledError && error.failed.includes(0))) throw error;
    }
  };
  if (eventIds) {
    await Promise.all(eventIds.map(removeOne));
    return;
  }
  let cursor: string | undefined;
  do {
    const page = await engine.kv.query({ pk: inboxPartition(subscriptionId), limit: 100, cursor });
    for (let i = 0; i < page.items.length; i += 16) await Promise.all(page.items.slice(i, i + 16).map((item) => removeOne(item.sk)));
    cursor = page.cursor;
  } while (cursor);
}
