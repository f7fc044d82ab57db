/**
 * The Events workspace statistics (spec 2 "Workspace statistics", docs/events/reference.md
 * "Stats", design.md "Exact statistics") stay exact under deletes, crashes and duplicates. Random
 * sequences of publish / pull / ack / lease lapse / webhook attempt (ok or failed, once or twice) /
 * crash / outbox sweep / subscribe / delete run on the Events domain functions over a real embedded
 * engine (SQLite in a temp dir, manual clock, a webhook receiver on 127.0.0.1), and after every step
 * the stats the GET /stats route answers are compared with a plain in-memory model:
 *
 * - `published`: events accepted, duplicates of an idempotency key not counted;
 * - `completed`: acks, and webhook deliveries ended by a 2xx, each delivery once;
 * - `depth`: messages in the inbox of an existing pull subscription (leased or not), plus webhook
 *   deliveries neither completed, dead nor dropped (a deleted webhook subscription's delivery leaves
 *   when its attempt comes up);
 * - `oldest_pending_age_seconds`: the oldest message in an existing pull inbox (null when none);
 * - `retries`: failed attempts n < 5 queued again, each (delivery, n) once; `dlq_inflow`: deliveries
 *   dead after their fifth attempt; `retry_rate`: failed attempts / (completed + dlq_inflow);
 *
 * and the counters themselves, before the read clamps them at 0, equal the model too (never negative).
 * Pull answers, ack answers and the queued deliveries are checked against the model on the way.
 * Crashes: a publish that dies before queueing its webhook deliveries (the outbox sweep queues them), an
 * attempt that dies as its outcome is counted or after it (the message comes back after its visibility
 * timeout), a plain restart; each closes the engine and opens the same file again; a crash part way
 * through a subscription delete (its own test below: the retried DELETE finishes it).
 *
 * The receiver dedupes by event id as the reference asks of receivers: once it answered 2xx for an
 * event, a repeated attempt of that event is answered 2xx again. Replay a failure with FC_SEED=<seed>
 * FC_PATH=<path> from fast-check's report.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import type { Engine, KvWrite } from '../../lambdas/engine/ports.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { publish, type PublishAnswer } from '../../lambdas/events/publish.js';
import { ack, pull, type NotAckedReason } from '../../lambdas/events/inbox.js';
import { MAX_ATTEMPTS, retryDelaySeconds, webhookConsumer } from '../../lambdas/events/delivery.js';
import { OUTBOX_GRACE_MS, sweepOutbox, type DeliveryMessage } from '../../lambdas/events/outbox.js';
import { Subscriptions, queuedDelivery } from '../../lambdas/events/subscriptions.js';
import { statsPartition, STAT_SHARDS, workspaceStats } from '../../lambdas/events/stats.js';
import { QUEUES } from '../../lambdas/engine/queues.js';
import { useSettings } from '../../lambdas/shared/settings.js';

const TYPES = ['a.x', 'b.y', 'c.z'] as const;
const PATTERNS = ['*', 'a.*', 'b.*', 'a.x', 'c.z'] as const;
const KEYS = ['k1', 'k2', 'k3'] as const;
const VISIBILITY_SECONDS = QUEUES.webhooks.visibilitySeconds;
const MAX_SUBSCRIPTIONS_IN_RUN = 8;

// ---------------------------------------------------------------------------------------------
// The webhook receiver: answers 2xx or 503 as the step says; once it took an event it takes it again.
// ---------------------------------------------------------------------------------------------

let receiver: http.Server;
let base: string;
let answer: 'ok' | 'fail' = 'ok';
const taken = new Set<string>();
let hookCounter = 0;

beforeAll(async () => {
  useSettings({ eventsAllowLoopbackWebhooks: true });
  receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const key = `${req.url}|${req.headers['x-event-id']}`;
      // A receiver under /down/ is down for good.
      if (answer === 'ok' && !req.url!.startsWith('/down/')) taken.add(key);
      res.statusCode = taken.has(key) ? 200 : 503;
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => receiver.close(r));
  useSettings(undefined);
});

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

type Mode = 'pull' | 'webhook';
interface Sub {
  id: string;
  mode: Mode;
  /** A webhook whose receiver always answers 503. */
  down?: boolean;
  types: string[];
  deleted: boolean;
}
interface Message {
  time: number;
  count: number;
  visibleAt: number;
}
interface Delivery {
  event: string;
  sub: string;
  /** How it ended, once. */
  ended?: 'completed' | 'dead' | 'dropped';
  /** Failed attempt numbers counted (each once). */
  failed: Set<number>;
}
interface QueuedCopy {
  event: string;
  sub: string;
  attempt: number;
  dueAt: number;
}

const matches = (pattern: string, type: string) => pattern === '*' || (pattern.endsWith('.*') ? type.startsWith(pattern.slice(0, -1)) : pattern === type);

class Model {
  subs: Sub[] = [];
  inbox = new Map<string, Map<string, Message>>();
  keys = new Set<string>();
  events = new Map<string, number>();
  published = 0;
  completed = 0;
  retries = 0;
  failedAttempts = 0;
  dlq = 0;
  deliveries = new Map<string, Delivery>();
  outbox: { event: string; sub: string; time: number }[] = [];
  queue: QueuedCopy[] = [];
  /** Deliveries the receiver answered 2xx (it answers 2xx again). */
  taken = new Set<string>();

  live(mode?: Mode): Sub[] {
    return this.subs.filter((s) => !s.deleted && (mode === undefined || s.mode === mode));
  }

  addSub(id: string, mode: Mode, types: string[], down = false) {
    this.subs.push({ id, mode, types, deleted: false, down });
    if (mode === 'pull') this.inbox.set(id, new Map());
  }

  deleteSub(id: string) {
    const s = this.subs.find((x) => x.id === id)!;
    s.deleted = true;
    this.inbox.delete(id);
  }

  /** An accepted event, fanned out to the subscriptions `listed` (webhooks to the outbox or the queue). */
  accept(eventId: string, type: string, now: number, listed: Sub[], queued: boolean) {
    this.published++;
    this.events.set(eventId, now);
    for (const s of listed.filter((x) => x.types.some((p) => matches(p, type)))) {
      if (s.mode === 'pull') {
        if (!s.deleted) this.inbox.get(s.id)!.set(eventId, { time: now, count: 0, visibleAt: 0 });
      } else {
        this.deliveries.set(`${eventId}#${s.id}`, { event: eventId, sub: s.id, failed: new Set() });
        if (queued) this.queue.push({ event: eventId, sub: s.id, attempt: 1, dueAt: now });
        else this.outbox.push({ event: eventId, sub: s.id, time: now });
      }
    }
  }

  /** Takes the copy the queue handed out; false when the model has no such copy due. */
  take(m: DeliveryMessage, now: number): boolean {
    const i = this.queue.findIndex((q) => q.event === m.event_id && q.sub === m.subscription_id && q.attempt === m.attempt && q.dueAt <= now);
    if (i < 0) return false;
    this.queue.splice(i, 1);
    return true;
  }

  /** One attempt of `m` answered `want` by the receiver; `count` false: it stopped before counting. */
  attempt(m: DeliveryMessage, want: 'ok' | 'fail', now: number, count = true) {
    const key = `${m.event_id}#${m.subscription_id}`;
    const d = this.deliveries.get(key)!;
    const sub = this.subs.find((s) => s.id === m.subscription_id)!;
    if (sub.deleted) {
      if (count && !d.ended) d.ended = 'dropped';
      return;
    }
    if (want === 'ok' && !sub.down) this.taken.add(key);
    if (this.taken.has(key)) {
      if (count && !d.ended) {
        d.ended = 'completed';
        this.completed++;
      }
      return;
    }
    if (m.attempt < MAX_ATTEMPTS) {
      this.queue.push({ event: m.event_id, sub: m.subscription_id, attempt: m.attempt + 1, dueAt: now + retryDelaySeconds(m.attempt) * 1000 });
      if (count && !d.failed.has(m.attempt)) {
        d.failed.add(m.attempt);
        this.failedAttempts++;
        this.retries++;
      }
      return;
    }
    if (count && !d.ended) {
      d.ended = 'dead';
      this.dlq++;
      this.failedAttempts++;
    }
  }

  sweep(now: number) {
    const due = this.outbox.filter((o) => o.time <= now - OUTBOX_GRACE_MS);
    this.outbox = this.outbox.filter((o) => o.time > now - OUTBOX_GRACE_MS);
    for (const o of due) this.queue.push({ event: o.event, sub: o.sub, attempt: 1, dueAt: now });
  }

  /** The visible messages (never leased, or their lease ended), oldest first. */
  visible(sub: string, now: number): string[] {
    return [...this.inbox.get(sub)!.entries()].filter(([, m]) => m.visibleAt <= now).map(([id]) => id).sort();
  }

  /** Leases the messages a pull answered; their new delivery counts. */
  lease(sub: string, ids: string[], leaseSeconds: number, now: number): number[] {
    return ids.map((id) => {
      const m = this.inbox.get(sub)!.get(id)!;
      m.count++;
      m.visibleAt = now + leaseSeconds * 1000;
      return m.count;
    });
  }

  ack(sub: string, id: string, now: number): NotAckedReason | undefined {
    const [eventId, count] = id.split('.');
    const box = this.inbox.get(sub)!;
    const m = box.get(eventId);
    if (!m) return 'not_found';
    if (!m.count) return 'not_leased';
    if (count !== undefined && Number(count) !== m.count) return 'stale_lease';
    if (m.visibleAt <= now) return 'lease_expired';
    box.delete(eventId);
    this.completed++;
    return undefined;
  }

  stats(now: number) {
    let inboxDepth = 0;
    let oldest = Infinity;
    for (const s of this.live('pull')) {
      for (const m of this.inbox.get(s.id)!.values()) {
        inboxDepth++;
        oldest = Math.min(oldest, m.time);
      }
    }
    const open = [...this.deliveries.values()].filter((d) => !d.ended).length;
    const finished = this.completed + this.dlq;
    return {
      published: this.published,
      completed: this.completed,
      depth: inboxDepth + open,
      oldest_pending_age_seconds: oldest === Infinity ? null : Math.floor((now - oldest) / 1000),
      retries: this.retries,
      retry_rate: finished ? this.failedAttempts / finished : 0,
      dlq_inflow: this.dlq,
    };
  }
}

// ---------------------------------------------------------------------------------------------
// The real thing: the Events domain functions on an embedded engine that can crash and reopen
// ---------------------------------------------------------------------------------------------

/** `target` with some members replaced (methods of the rest bound to it). */
function patched<T extends object>(target: T, overrides: Partial<Record<keyof T, unknown>>): T {
  return new Proxy(target, {
    get(t, p) {
      if (Object.prototype.hasOwnProperty.call(overrides, p)) return (overrides as Record<PropertyKey, unknown>)[p];
      const v = Reflect.get(t, p, t);
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}

class Crash extends Error {
  constructor() {
    super('simulated crash');
  }
}

const writeKeyPk = (w: KvWrite): string | undefined => {
  const k = 'put' in w ? w.put : 'update' in w ? w.update : 'delete' in w ? w.delete : undefined;
  return k && typeof k === 'object' && 'pk' in k ? String(k.pk) : undefined;
};

class Real {
  clock = new ManualClock(Date.UTC(2026, 10, 27, 12));
  dataDir = mkdtempSync(join(tmpdir(), 'events-stats-model-'));
  engine: EmbeddedEngine = createEmbeddedEngine({ dataDir: this.dataDir, clock: this.clock });
  workspaceId = '';
  principal!: Principal;
  steps = 0;
  crashes = 0;

  async setup(model: Model) {
    const tenants = new Tenants(this.engine.kv, () => this.clock.now());
    const org = await tenants.createOrganization('acme');
    this.workspaceId = (await tenants.createWorkspace(org.id, 'main')).id;
    this.principal = {
      kind: 'secret_key',
      credentialId: 'key_model',
      organizationId: org.id,
      applicationId: null,
      workspaceId: null,
      capabilities: null,
      userId: null,
      claims: null,
      origins: null,
      permissions: null,
    };
    await this.subscribe(model, 'pull', ['*']);
    await this.subscribe(model, 'pull', ['a.*']);
    await this.subscribe(model, 'webhook', ['a.*']);
    await this.subscribe(model, 'webhook', ['b.*', 'c.z']);
    await this.subscribe(model, 'webhook', ['c.z'], true);
  }

  async subscribe(model: Model, mode: Mode, types: string[], down = false) {
    const delivery = mode === 'webhook' ? { mode, url: `${base}/${down ? 'down' : 'hook'}/${++hookCounter}` } : { mode };
    const s = await new Subscriptions(this.engine).create(this.workspaceId, { types, delivery });
    model.addSub(s.subscription_id, mode, types, down);
  }

  /** The engine dies (nothing more of the step runs) and a new process opens the same file. */
  async reopen() {
    this.crashes++;
    // Let the step's other branches (already failing or done) settle before the file closes.
    await new Promise((r) => setTimeout(r, 5));
    await this.engine.close();
    this.engine = createEmbeddedEngine({ dataDir: this.dataDir, clock: this.clock });
  }

  /** An engine whose key-value transactions fail (a crash) when `when` says so. */
  failingTransactions(when: (writes: KvWrite[]) => boolean): Engine {
    const kv = this.engine.kv;
    return patched(this.engine as Engine, {
      kv: patched(kv, {
        transact: async (writes: KvWrite[]) => {
          if (when(writes)) throw new Crash();
          return kv.transact(writes);
        },
      }),
    });
  }

  /** As GET /stats answers (lambdas/http/handlers/events/stats.ts). */
  async stats() {
    const inboxes = (await new Subscriptions(this.engine).list(this.workspaceId)).filter((s) => !queuedDelivery(s)).map((s) => s.subscription_id);
    const { workspace_id, ...rest } = await workspaceStats(this.engine, this.workspaceId, inboxes);
    expect(workspace_id).toBe(this.workspaceId);
    return rest;
  }

  /** The counters' sums before the read clamps them at 0. */
  async rawCounters() {
    const page = await this.engine.kv.query({ pk: statsPartition(this.workspaceId), limit: STAT_SHARDS + 1 });
    const sum = (k: string) => page.items.reduce((n, i) => n + (typeof i[k] === 'number' ? (i[k] as number) : 0), 0);
    return { published: sum('published'), completed: sum('completed'), depth: sum('depth'), retries: sum('retries'), dlq_inflow: sum('dlq_inflow') };
  }

  async close() {
    await this.engine.close();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** What the runs did, for the log line (a property that never delivers proves little). */
const tally = new Map<string, number>();
const note = (what: string, n = 1) => tally.set(what, (tally.get(what) ?? 0) + n);

async function compare(model: Model, real: Real) {
  real.steps++;
  const want = model.stats(real.clock.now());
  expect(await real.stats()).toEqual(want);
  expect(await real.rawCounters()).toEqual({ published: want.published, completed: want.completed, depth: want.depth, retries: want.retries, dlq_inflow: want.dlq_inflow });
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

type Cmd = fc.AsyncCommand<Model, Real>;
const pick = <T>(xs: T[], n: number): T | undefined => (xs.length ? xs[n % xs.length] : undefined);

interface EventSpec {
  type: string;
  key?: string;
}

/** Checks a publish answer against the model's keys, then applies it. */
function applyPublish(model: Model, answer: PublishAnswer, events: EventSpec[], now: number, listed: Sub[], queued: boolean) {
  expect(answer.rejected).toEqual([]);
  expect(answer.accepted).toHaveLength(events.length);
  const seen = new Set(model.keys);
  // Within one call, which of two events with one new key wins is the store's choice: one of them.
  const fresh = events.filter((e) => e.key === undefined || (!seen.has(e.key) && seen.add(e.key))).length;
  expect(answer.accepted.filter((a) => !a.duplicate)).toHaveLength(fresh);
  events.forEach((e, i) => {
    const a = answer.accepted[i];
    if (e.key !== undefined && model.keys.has(e.key)) expect(a.duplicate).toBe(true);
    if (a.duplicate) return;
    if (e.key !== undefined) model.keys.add(e.key);
    model.accept(a.event_id, e.type, now, listed, queued);
  });
}

class PublishCmd implements Cmd {
  constructor(
    readonly events: EventSpec[],
    /** The process dies after the commit, before any webhook delivery is queued. */
    readonly crash: boolean,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const now = real.clock.now();
    const body = { events: this.events.map((e) => ({ type: e.type, data: { n: 1 }, ...(e.key ? { idempotency_key: e.key } : {}) })) };
    const listed = model.live();
    if (!this.crash) {
      applyPublish(model, await publish(real.engine, real.principal, real.workspaceId, body), this.events, now, listed, true);
    } else {
      const queue = real.engine.queue;
      const engine = patched(real.engine as Engine, {
        queue: patched(queue, {
          send: async (name: string, ...rest: [string, { delaySeconds?: number }?]) => {
            if (name === 'webhooks') throw new Crash();
            return queue.send(name, ...rest);
          },
        }),
      });
      const webhooks = this.events.some((e) => listed.some((s) => s.mode === 'webhook' && s.types.some((p) => matches(p, e.type))));
      let answer: PublishAnswer | undefined;
      try {
        answer = await publish(engine, real.principal, real.workspaceId, body);
      } catch (error) {
        if (!(error instanceof Crash)) throw error;
      }
      await real.reopen();
      if (answer) {
        applyPublish(model, answer, this.events, now, listed, true);
      } else {
        // The caller saw no answer; what the commit holds is read back: its events are the new ones.
        expect(webhooks).toBe(true);
        const ids = await committedEvents(real, model);
        applyPublish(model, reconstruct(model, this.events, ids), this.events, now, listed, false);
      }
    }
    await compare(model, real);
  }
  toString = () => `publish(${this.events.map((e) => e.type + (e.key ? `[${e.key}]` : '')).join(',')}${this.crash ? ', crash before queueing' : ''})`;
}

/** The workspace's event ids the model does not know yet, oldest first. */
async function committedEvents(real: Real, model: Model): Promise<string[]> {
  const page = await real.engine.kv.query({ pk: `evt#${real.workspaceId}`, limit: 1000 });
  return page.items.map((i) => String(i.sk)).filter((id) => !model.events.has(id)).sort();
}

/** A publish answer for a call that crashed: new ids in order for the events that were not duplicates. */
function reconstruct(model: Model, events: EventSpec[], ids: string[]): PublishAnswer {
  const seen = new Set(model.keys);
  let next = 0;
  const accepted = events.map((e) => {
    if (e.key !== undefined && seen.has(e.key)) return { event_id: 'evt_duplicate', duplicate: true };
    if (e.key !== undefined) seen.add(e.key);
    return { event_id: ids[next++], duplicate: false };
  });
  expect(next).toBe(ids.length);
  return { accepted, rejected: [] };
}

class PullCmd implements Cmd {
  constructor(
    readonly sub: number,
    readonly max: number,
    readonly leaseSeconds: number,
  ) {}
  check = (m: Readonly<Model>) => m.live('pull').length > 0;
  async run(model: Model, real: Real) {
    const s = pick(model.live('pull'), this.sub)!;
    const now = real.clock.now();
    const got = await pull(real.engine, s.id, this.max, this.leaseSeconds);
    const visible = model.visible(s.id, now);
    // As many as it may take, each visible, each once, and the oldest first: a pull returns ended leases
    // to the waiting index before it takes (it was not oldest first before; the test "oldest first" below).
    const ids = got.map((m) => m.event_id);
    expect(ids).toHaveLength(Math.min(this.max, visible.length));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual([...visible].sort().slice(0, ids.length));
    for (const id of ids) expect(visible).toContain(id);
    const counts = model.lease(s.id, ids, this.leaseSeconds, now);
    expect(got.map((m) => [m.delivery_count, m.lease_id])).toEqual(ids.map((id, i) => [counts[i], `${id}.${counts[i]}`]));
    await compare(model, real);
  }
  toString = () => `pull(sub ${this.sub}, max ${this.max}, lease ${this.leaseSeconds} s)`;
}

type AckForm = 'event' | 'lease' | 'stale' | 'other';
class AckCmd implements Cmd {
  constructor(
    readonly sub: number,
    readonly picks: { message: number; form: AckForm }[],
  ) {}
  check = (m: Readonly<Model>) => m.live('pull').length > 0;
  async run(model: Model, real: Real) {
    const s = pick(model.live('pull'), this.sub)!;
    const box = [...model.inbox.get(s.id)!.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
    const others = [...model.events.keys()].filter((id) => !model.inbox.get(s.id)!.has(id));
    const ids = new Map<string, string>();
    for (const p of this.picks) {
      const entry = pick(box, p.message);
      let id: string | undefined;
      if (p.form === 'other' || !entry) id = pick(others, p.message);
      else if (p.form === 'event' || !entry[1].count) id = entry[0];
      else if (p.form === 'lease') id = `${entry[0]}.${entry[1].count}`;
      else id = `${entry[0]}.${Math.max(1, entry[1].count - 1)}`;
      if (id && !ids.has(id.split('.')[0])) ids.set(id.split('.')[0], id);
    }
    if (!ids.size) return compare(model, real);
    const sent = [...ids.values()];
    const got = await ack(real.engine, real.workspaceId, s.id, sent);
    const now = real.clock.now();
    const reasons = sent.map((id) => ({ id, reason: model.ack(s.id, id, now) }));
    expect(got).toEqual({ acked: reasons.filter((r) => !r.reason).length, not_acked: reasons.filter((r) => r.reason) });
    await compare(model, real);
  }
  toString = () => `ack(sub ${this.sub}, ${this.picks.map((p) => `${p.form}#${p.message}`).join(',')})`;
}

class AdvanceCmd implements Cmd {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(model: Model, real: Real) {
    real.clock.advance(this.ms);
    await compare(model, real);
  }
  toString = () => `advance(${this.ms / 1000} s)`;
}

/** Receives the webhook delivery due first (as the queue's consumer would), or none. */
async function receiveDue(model: Model, real: Real): Promise<{ receipt: string; id: string; body: string; m: DeliveryMessage } | undefined> {
  const [got] = await real.engine.queue.receive('webhooks', { max: 1, visibilitySeconds: VISIBILITY_SECONDS });
  const now = real.clock.now();
  if (!got) {
    expect(model.queue.filter((q) => q.dueAt <= now), 'deliveries the model has due').toEqual([]);
    return undefined;
  }
  const m = JSON.parse(got.body) as DeliveryMessage;
  expect(model.take(m, now), `the queue handed out ${got.body}, which the model has not due`).toBe(true);
  return { receipt: got.receipt, id: got.id, body: got.body, m };
}

class DeliverCmd implements Cmd {
  constructor(
    /** One attempt per due message, up to this many, each answered as given. */
    readonly outcomes: ('ok' | 'fail')[],
    /** The queue hands the same message out twice (SQS at least once): the consumer runs it twice. */
    readonly duplicate: boolean,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    for (const outcome of this.outcomes) {
      const got = await receiveDue(model, real);
      if (!got) break;
      answer = outcome;
      const consumer = webhookConsumer(real.engine, { timeoutMs: 5_000 });
      const message = { id: got.id, receipt: got.receipt, body: got.body, receiveCount: 1 };
      expect(await consumer([message])).toEqual({ failed: [] });
      model.attempt(got.m, outcome, real.clock.now());
      if (this.duplicate) {
        expect(await consumer([message])).toEqual({ failed: [] });
        model.attempt(got.m, outcome, real.clock.now());
      }
      await real.engine.queue.delete('webhooks', got.receipt);
      await compare(model, real);
    }
    await compare(model, real);
  }
  toString = () => `deliver(${this.outcomes.join(',')}${this.duplicate ? ', each twice' : ''})`;
}

/** Receivers down for a while: every due attempt fails, the clock moves to the next retry, `rounds` times (the ladder runs to dead letters). */
class LadderCmd implements Cmd {
  constructor(
    readonly rounds: number,
    readonly duplicate: boolean,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const deliver = new DeliverCmd(Array<'fail'>(30).fill('fail'), this.duplicate);
    for (let r = 0; r < this.rounds; r++) {
      await deliver.run(model, real);
      const next = Math.min(...model.queue.map((q) => q.dueAt));
      if (next === Infinity) break;
      real.clock.advance(Math.max(0, next - real.clock.now()));
    }
    await compare(model, real);
  }
  toString = () => `ladder(receivers down for ${this.rounds} retry rounds${this.duplicate ? ', each attempt twice' : ''})`;
}

class DeliverCrashCmd implements Cmd {
  constructor(
    readonly outcome: 'ok' | 'fail',
    /** `before-count`: the process dies as the attempt's outcome is counted; `after-count`: once it is, before the message is deleted. */
    readonly point: 'before-count' | 'after-count',
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const got = await receiveDue(model, real);
    if (got) {
      answer = this.outcome;
      const message = { id: got.id, receipt: got.receipt, body: got.body, receiveCount: 1 };
      const now = real.clock.now();
      if (this.point === 'before-count') {
        const engine = real.failingTransactions((writes) => writeKeyPk(writes[0])?.startsWith('evdone#') === true);
        expect(await webhookConsumer(engine, { timeoutMs: 5_000 })([message])).toEqual({ failed: [got.id] });
        model.attempt(got.m, this.outcome, now, false);
      } else {
        expect(await webhookConsumer(real.engine, { timeoutMs: 5_000 })([message])).toEqual({ failed: [] });
        model.attempt(got.m, this.outcome, now);
      }
      await real.reopen();
      // Never deleted: the queue hands it out again when its visibility timeout ends.
      model.queue.push({ event: got.m.event_id, sub: got.m.subscription_id, attempt: got.m.attempt, dueAt: now + VISIBILITY_SECONDS * 1000 });
    }
    await compare(model, real);
  }
  toString = () => `deliver-crash(${this.outcome}, ${this.point})`;
}

class SweepCmd implements Cmd {
  check = () => true;
  async run(model: Model, real: Real) {
    const now = real.clock.now();
    const swept = await sweepOutbox(real.engine);
    const before = model.outbox.length;
    model.sweep(now);
    expect(swept).toBe(before - model.outbox.length);
    await compare(model, real);
  }
  toString = () => 'sweepOutbox()';
}

class SubscribeCmd implements Cmd {
  constructor(
    readonly mode: Mode,
    readonly types: string[],
  ) {}
  check = (m: Readonly<Model>) => m.subs.length < MAX_SUBSCRIPTIONS_IN_RUN;
  async run(model: Model, real: Real) {
    await real.subscribe(model, this.mode, this.types);
    await compare(model, real);
  }
  toString = () => `subscribe(${this.mode}, ${this.types.join('|')})`;
}

class DeleteCmd implements Cmd {
  constructor(readonly sub: number) {}
  check = (m: Readonly<Model>) => m.live().length > 0;
  async run(model: Model, real: Real) {
    const s = pick(model.live(), this.sub)!;
    await new Subscriptions(real.engine).delete(real.workspaceId, s.id);
    model.deleteSub(s.id);
    await compare(model, real);
  }
  toString = () => `delete(sub ${this.sub})`;
}

/** A publish racing the delete of a pull subscription it matches: whichever lists first, nothing of it stays. */
class PublishDuringDeleteCmd implements Cmd {
  constructor(
    readonly sub: number,
    readonly events: EventSpec[],
  ) {}
  check = (m: Readonly<Model>) => m.live('pull').length > 0;
  async run(model: Model, real: Real) {
    const s = pick(model.live('pull'), this.sub)!;
    const now = real.clock.now();
    const listed = model.live();
    const body = { events: this.events.map((e) => ({ type: e.type, data: 1 })) };
    const [answer] = await Promise.all([publish(real.engine, real.principal, real.workspaceId, body), new Subscriptions(real.engine).delete(real.workspaceId, s.id)]);
    model.deleteSub(s.id);
    applyPublish(model, answer, this.events, now, listed, true);
    await compare(model, real);
  }
  toString = () => `publish(${this.events.map((e) => e.type).join(',')}) during delete(pull sub ${this.sub})`;
}

/** The process dies at the first inbox removal of a subscription's delete. */
class DeleteCrashCmd implements Cmd {
  constructor(readonly sub: number) {}
  check = (m: Readonly<Model>) => m.live('pull').length > 0;
  async run(model: Model, real: Real) {
    const s = pick(model.live('pull'), this.sub)!;
    const engine = real.failingTransactions((writes) => writes.some((w) => 'delete' in w && writeKeyPk(w)?.startsWith('inbox#')));
    await new Subscriptions(engine).delete(real.workspaceId, s.id).catch((error) => {
      if (!(error instanceof Crash)) throw error;
    });
    await real.reopen();
    // The delete's answer was lost, so the caller deletes again: that finishes it (or finds it gone, when
    // its inbox was empty and the first delete completed before any inbox write could fail).
    await new Subscriptions(real.engine).delete(real.workspaceId, s.id).catch((error) => expect(error).toMatchObject({ code: 'subscription_not_found' }));
    model.deleteSub(s.id);
    await compare(model, real);
  }
  toString = () => `delete(pull sub ${this.sub}, crash at its first inbox removal)`;
}

class RestartCmd implements Cmd {
  check = () => true;
  async run(model: Model, real: Real) {
    await real.reopen();
    await compare(model, real);
  }
  toString = () => 'restart()';
}

// ---------------------------------------------------------------------------------------------
// Arbitraries and the property
// ---------------------------------------------------------------------------------------------

const eventSpec: fc.Arbitrary<EventSpec> = fc.record({ type: fc.constantFrom(...TYPES), key: fc.option(fc.constantFrom(...KEYS), { nil: undefined, freq: 3 }) });
const events = fc.array(eventSpec, { minLength: 1, maxLength: 4 });
const unkeyed = fc.array(fc.constantFrom(...TYPES).map((type): EventSpec => ({ type })), { minLength: 1, maxLength: 3 });
const types = fc.uniqueArray(fc.constantFrom(...PATTERNS), { minLength: 1, maxLength: 2 });
const outcome = fc.constantFrom<'ok' | 'fail'>('ok', 'fail', 'fail');

function commands(withDeleteCrash: boolean): fc.Arbitrary<Cmd>[] {
  const w = <T>(arbitrary: fc.Arbitrary<T>, weight: number) => ({ arbitrary, weight });
  return [
    fc.oneof(
      w(events.map((e) => new PublishCmd(e, false) as Cmd), 5),
      w(events.map((e) => new PublishCmd(e, true) as Cmd), 1),
      w(fc.tuple(fc.nat(7), fc.integer({ min: 1, max: 4 }), fc.constantFrom(5, 30, 300)).map(([s, m, l]) => new PullCmd(s, m, l) as Cmd), 3),
      w(fc.tuple(fc.nat(7), fc.array(fc.record({ message: fc.nat(9), form: fc.constantFrom<AckForm>('event', 'lease', 'lease', 'stale', 'other') }), { minLength: 1, maxLength: 3 })).map(([s, p]) => new AckCmd(s, p) as Cmd), 3),
      w(fc.constantFrom(1_000, 5_000, 11_000, 31_000, 61_000, 90_000, 300_000).map((ms) => new AdvanceCmd(ms) as Cmd), 4),
      w(fc.tuple(fc.array(outcome, { minLength: 1, maxLength: 4 }), fc.boolean()).map(([o, d]) => new DeliverCmd(o, d) as Cmd), 8),
      w(fc.tuple(fc.integer({ min: 1, max: 5 }), fc.boolean()).map(([r, d]) => new LadderCmd(r, d) as Cmd), 2),
      w(fc.tuple(outcome, fc.constantFrom<'before-count' | 'after-count'>('before-count', 'after-count')).map(([o, p]) => new DeliverCrashCmd(o, p) as Cmd), 1),
      w(fc.constant(new SweepCmd() as Cmd), 1),
      w(fc.tuple(fc.constantFrom<Mode>('pull', 'webhook'), types).map(([m, t]) => new SubscribeCmd(m, t) as Cmd), 1),
      w(fc.nat(7).map((s) => new DeleteCmd(s) as Cmd), 1),
      w(fc.tuple(fc.nat(7), unkeyed).map(([s, e]) => new PublishDuringDeleteCmd(s, e) as Cmd), 1),
      w(fc.constant(new RestartCmd() as Cmd), 1),
      ...(withDeleteCrash ? [w(fc.nat(7).map((s) => new DeleteCrashCmd(s) as Cmd), 2)] : []),
    ),
  ];
}

async function checkStatsModel(o: { numRuns: number; maxCommands: number; withDeleteCrash: boolean; seed?: number; endOnFailure?: boolean }) {
  const env = process.env;
  const seed = env.FC_SEED ? Number(env.FC_SEED) : (o.seed ?? (Date.now() ^ (Math.random() * 0x100000000)) | 0);
  let runs = 0;
  let steps = 0;
  let crashes = 0;
  const property = fc.asyncProperty(fc.commands(commands(o.withDeleteCrash), { maxCommands: o.maxCommands, size: 'max' }), async (cmds) => {
    runs++;
    const real = new Real();
    try {
      const model = new Model();
      await real.setup(model);
      await compare(model, real);
        for (const c of cmds) note(String(c).split('(')[0]);
      await fc.asyncModelRun(() => ({ model, real }), cmds);
      note('published', model.published);
      note('completed', model.completed);
      note('retries', model.retries);
      note('dead', model.dlq);
      for (const d of model.deliveries.values()) for (const n of d.failed) note(`failed attempt ${n}`);
      note('dropped', [...model.deliveries.values()].filter((d) => d.ended === 'dropped').length);
      note('open deliveries', [...model.deliveries.values()].filter((d) => !d.ended).length);
    } finally {
      steps += real.steps;
      crashes += real.crashes;
      await real.close();
    }
  });
  await fc.assert(property, { numRuns: env.FC_RUNS ? Number(env.FC_RUNS) : o.numRuns, seed, path: env.FC_PATH, endOnFailure: o.endOnFailure ?? env.FC_SHRINK === '0', interruptAfterTimeLimit: 60_000 });
  return { seed, runs, steps, crashes, tally: Object.fromEntries(tally) };
}

it('workspace stats equal the model over publish / pull / ack / lapse / deliver / duplicate / crash / sweep / delete sequences', { timeout: 120_000 }, async () => {
  const started = Date.now();
  const done = await checkStatsModel({ numRuns: 50, maxCommands: 50, withDeleteCrash: false });
  console.log(`events stats model (FC_SEED=${done.seed}): ${done.runs} runs, ${done.steps} steps, ${done.crashes} crashes in ${((Date.now() - started) / 1000).toFixed(1)} s`, done.tally);
  expect(done.steps).toBeGreaterThan(0);
});

// Drift found by this model, fixed since: a subscription delete committed the subscription's removal
// first and removed its inbox messages (each with its `depth`) afterwards; a process that died in between
// left the messages and their depth for good (a repeated DELETE answered 404). Shrunk counterexample:
// [publish(a.x), delete(pull sub 0, crash before its inbox is removed)] -> depth 3, model 2. The inbox
// now goes first, and the retried DELETE finishes. (A crash of a publisher between its commit and
// removeDeleted, racing a delete, is left to the delete's second pass; the model does not generate it.)
it('stats stay exact when the process dies part way through a subscription delete', { timeout: 120_000 }, async () => {
  const done = await checkStatsModel({ numRuns: 30, maxCommands: 30, withDeleteCrash: true, seed: 1992256901 });
  expect(done.crashes).toBeGreaterThan(0);
});

// Drift found by this model (not about the counters), fixed since: a pull was not oldest first once more
// leases ended than it read. It reads min(100, 2 * max) entries of the ended-lease index, which sorts by the
// lease's end, not by event id, so a message whose long lease ended later stays behind younger ones
// whose short leases ended earlier (docs/events/design.md "Leases" and "Tiers": merged oldest first,
// in publish order within an inbox). Shrunk counterexample: publish(a.x), pull(max 1, lease 300 s),
// publish(a.x, a.x), pull(max 2, lease 5 s), advance(300 s), pull(max 1): the second event comes, not
// the first.
it('a pull answers the oldest visible message first, whichever lease ended first', async () => {
  const real = new Real();
  try {
    const model = new Model();
    await real.setup(model);
    const sub = model.live('pull')[1].id; // a.*
    const ws = real.workspaceId;
    const one = async () => (await publish(real.engine, real.principal, ws, { events: [{ type: 'a.x', data: 1 }] })).accepted[0].event_id;
    const first = await one();
    const [second, third] = [await one(), await one()];
    expect([first, second, third]).toEqual([first, second, third].sort());
    await pull(real.engine, sub, 1, 300);
    const short = await pull(real.engine, sub, 2, 5);
    expect(short.map((m) => m.event_id)).toEqual([second, third]);
    real.clock.advance(300_000);
    const [got] = await pull(real.engine, sub, 1, 5);
    // Only the known drift (the second event) is the expected failure; the first means it is fixed.
    if (got.event_id === second) expect(got.event_id).toBe(first);
    expect([first, second]).toContain(got.event_id);
  } finally {
    await real.close();
  }
});
