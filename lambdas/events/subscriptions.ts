/**
 * Subscriptions of a workspace (spec 4.21): 1 to 20 type patterns, a delivery mode, at most 50 per
 * workspace. A webhook subscription's signing secrets are kept sealed in its item (secret-box.ts) and
 * shown only in the create and rotate answers; elsewhere `secret_ref: "managed"`. The 50 limit is held
 * by slot items (claimSlot).
 */
import type { Engine, KvItem } from '../engine/ports.js';
import { ConditionFailedError, TransactionCanceledError } from '../engine/errors.js';
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseBody } from '../shared/validate.js';
import { newId } from '../shared/ids.js';
import { settings } from '../shared/settings.js';
import { contentionPauseMs, pause } from '../shared/backoff.js';
import { subscriptionKey, subscriptionSlotKey, subscriptionsPartition } from './keys.js';
import { checkWebhookUrl, resolveDestination } from './webhook-url.js';
import { liveSecrets, newSigningSecret, rotate, type StoredSecret } from './signing.js';
import { openSigningSecret, sealSigningSecret } from './secret-box.js';
import { removeInbox } from './inbox.js';
import { Tenants } from '../auth/tenants.js';
import { busRegion, checkBusDestination, MAX_DETAIL_TYPE_CHARS } from './eventbridge.js';

export const MAX_SUBSCRIPTIONS = 50;
export const MAX_PATTERNS = 20;
/** The spec's three modes, and `eventbridge`, an extension (docs/events/eventbridge.md). */
export const DELIVERY_MODES = ['webhook', 'pull', 'websocket', 'eventbridge'] as const;
export type DeliveryMode = (typeof DELIVERY_MODES)[number];
export const SUBSCRIPTION_ID_PATTERN = /^sub_[0-9a-z]{26}$/;
/** A type, `*`, or a type prefix ending in `.*` (matching deeper types too). */
const PATTERN = /^(?:\*|[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*(?:\.\*)?)$/;
const MAX_PATTERN_BYTES = 128;
/** How long a create keeps looking for a free slot while concurrent creates take them. */
const SLOT_RETRY_BUDGET_MS = 10_000;
const MAX_ATTEMPTS = 20;

export interface Subscription {
  subscription_id: string;
  types: string[];
  delivery: { mode: DeliveryMode; url?: string; secret_ref?: 'managed'; event_bus_arn?: string; detail_type?: string };
  created_at: string;
}

/** A subscription as stored: the answer's fields plus the workspace and the sealed secrets. */
export interface StoredSubscription extends Subscription {
  workspace_id: string;
  /** An eventbridge subscription's organization: whose allow-list each delivery checks. */
  organization_id?: string;
  /** Which of the workspace's MAX_SUBSCRIPTIONS slots it holds. */
  slot?: number;
  secrets?: StoredSecret[];
  /** How many times its secret was rotated: the condition of the next rotation. */
  rotations?: number;
}

export const subscriptionNotFound = (id: string) => new PlatformError('subscription_not_found', `No subscription "${id}" in this workspace.`);
/** A path id that cannot be a subscription's: 400 invalid_id (a well-formed unknown one is 404). */
function checkSubscriptionId(id: string): void {
  if (!SUBSCRIPTION_ID_PATTERN.test(id)) throw new PlatformError('invalid_id', 'A subscription id is "sub_" and 26 characters.', 'subscription_id');
}

/** Whether `type` matches `pattern`: `*` everything, `a.*` every type below `a`, else the type itself. */
export function patternMatches(pattern: string, type: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('.*')) return type.startsWith(pattern.slice(0, -1));
  return pattern === type;
}

export const subscriptionMatches = (s: Subscription, type: string) => s.types.some((p) => patternMatches(p, type));

/** Delivered through the `webhooks` queue (outbox, retry ladder, dead letters): webhook and eventbridge subscriptions; the others have an inbox. */
export const queuedDelivery = (s: Subscription) => s.delivery.mode === 'webhook' || s.delivery.mode === 'eventbridge';

/** The answer's view: never a secret, `secret_ref: "managed"` for webhooks. */
export function subscriptionView(s: StoredSubscription): Subscription {
  const delivery =
    s.delivery.mode === 'webhook'
      ? { mode: s.delivery.mode, url: s.delivery.url, secret_ref: 'managed' as const }
      : s.delivery.mode === 'eventbridge'
        ? { mode: s.delivery.mode, event_bus_arn: s.delivery.event_bus_arn, ...(s.delivery.detail_type === undefined ? {} : { detail_type: s.delivery.detail_type }) }
        : { mode: s.delivery.mode };
  return { subscription_id: s.subscription_id, types: [...s.types], delivery, created_at: s.created_at };
}

/** A subscription id in words: `sub_` and a ULID in lowercase Crockford base32. */
export const SUBSCRIPTION_ID_DESCRIPTION = '`sub_` and 26 characters.';

/** The answers' schemas (spec 2 "Subscription"), built at their first use. */
const answerSchemas = onFirstUse(() => {
  const id = z.string().check(z.regex(SUBSCRIPTION_ID_PATTERN), z.describe(SUBSCRIPTION_ID_DESCRIPTION));
  const delivery = z
    .discriminatedUnion('mode', [
      z.strictObject({
        mode: z.literal('webhook'),
        url: z.string().check(z.describe('The https URL each event is POSTed to.')),
        secret_ref: z.literal('managed').check(z.describe('The signing secret is kept by the service, never shown again.')),
      }),
      z.strictObject({ mode: z.literal('pull') }),
      z.strictObject({ mode: z.literal('websocket') }),
      z.strictObject({
        mode: z.literal('eventbridge').check(z.describe('An extension (docs/events/eventbridge.md).')),
        event_bus_arn: z.string(),
        detail_type: z.optional(z.string().check(z.describe("The entries' DetailType, when not the event's type."))),
      }),
    ])
    .check(z.meta({ id: 'Delivery' }));
  const shape = {
    subscription_id: id,
    types: z.array(z.string()).check(z.describe('1 to 20 type patterns: a type, `*`, or a prefix ending in `.*`.')),
    delivery,
    created_at: z.iso.datetime(),
  };
  const secret = z.string().check(z.regex(/^whsec_[A-Za-z0-9+/]+=*$/), z.describe('`whsec_…`: the HMAC-SHA256 key of the signatures (the whole string, as UTF-8). Shown once.'));
  const subscription = z.strictObject(shape).check(z.meta({ id: 'Subscription', description: 'A subscription as every answer but create shows it: never a secret.' }));
  return {
    subscription,
    created: z.strictObject({ ...shape, signing_secret: z.optional(secret.check(z.describe('Webhook subscriptions only: the secret that signs its deliveries, shown this once.'))) }),
    list: z.strictObject({ subscriptions: z.array(subscription).check(z.describe('Oldest first.')) }),
    rotated: z.strictObject({
      subscription_id: id,
      signing_secret: secret,
      previous_valid_until: z.iso.datetime().check(z.describe('The previous secrets still sign until then (24 hours on).')),
    }),
  };
});

/** A Subscription as answered (never a secret). */
export const subscriptionSchema = () => answerSchemas().subscription;
/** The create answer: the Subscription, and a webhook's `signing_secret`, shown once. */
export const newSubscriptionSchema = () => answerSchemas().created;
/** GET .../subscriptions' answer. */
export const subscriptionListSchema = () => answerSchemas().list;
/** POST .../rotate-secret's answer. */
export const rotatedSecretSchema = () => answerSchemas().rotated;

/** The request schemas, built at their first use (onFirstUse): only subscription calls need them. */
const subscriptionSchemas = onFirstUse(() => {
  const patterns = `types holds 1 to ${MAX_PATTERNS} patterns.`;
  const badPattern = 'A pattern is "*", a type (dotted lowercase words), or a type prefix ending in ".*".';
  const pattern = z.string({ error: badPattern }).check(z.refine((t) => Buffer.byteLength(t) <= MAX_PATTERN_BYTES && PATTERN.test(t), badPattern));
  // The count comes first (zod reads no item of an array of the wrong length): one message for any bad pattern.
  const types = z
    .array(pattern, { error: patterns })
    .check(z.minLength(1, patterns), z.maxLength(MAX_PATTERNS, patterns), z.describe('Type patterns: a type, `*`, or a prefix ending in `.*` (matching deeper types too).'));
  const noUrl = (mode: string) => z.optional(z.never({ error: `A${mode === 'eventbridge' ? 'n' : ''} ${mode} subscription takes no url.` }));
  const arn = 'An eventbridge subscription needs delivery.event_bus_arn, an event bus ARN: arn:aws:events:<region>:<account>:event-bus/<name>.';
  const detail = `delivery.detail_type is 1 to ${MAX_DETAIL_TYPE_CHARS} printable characters (default: the event's type).`;
  const delivery = z.discriminatedUnion(
    'mode',
    [
      z.strictObject({ mode: z.literal('webhook'), url: z.string({ error: 'A webhook subscription needs delivery.url.' }).check(z.describe('An https URL with a public address.')) }),
      z.strictObject({ mode: z.literal('pull'), url: noUrl('pull') }),
      z.strictObject({ mode: z.literal('websocket'), url: noUrl('websocket') }),
      z.strictObject({
        mode: z.literal('eventbridge'),
        url: noUrl('eventbridge'),
        event_bus_arn: z.string({ error: arn }).check(z.refine((a) => busRegion(a) !== undefined, arn), z.describe("The event bus, on the organization's allow-list.")),
        detail_type: z.optional(
          z.string({ error: detail }).check(
            z.minLength(1, detail),
            z.maxLength(MAX_DETAIL_TYPE_CHARS, detail),
            z.refine((d) => !/[\x00-\x1f]/.test(d), detail),
            z.describe("The entries' DetailType (default: the event's type)."),
          ),
        ),
      }),
    ],
    { error: 'delivery is {"mode": "webhook" | "pull" | "websocket" | "eventbridge", "url"?, "event_bus_arn"?, "detail_type"?}; delivery.mode is webhook, pull, websocket or eventbridge.' },
  );
  const body = z.strictObject({ types, delivery });
  return { body, rotate: z.strictObject({}) };
});

/** POST .../subscriptions' body: `{types, delivery}`. */
export const subscriptionBodySchema = () => subscriptionSchemas().body;
/** POST .../rotate-secret's body: no fields (none, `{}` or `null`). */
export const rotateSecretBodySchema = () => subscriptionSchemas().rotate;

export interface SubscriptionBody {
  types: string[];
  mode: DeliveryMode;
  url?: string;
  bus?: { event_bus_arn: string; detail_type?: string };
}

/** A subscription's body: anything wrong in `types` is 400 invalid_subscription, in `delivery` invalid_delivery. */
export function parseSubscriptionBody(body: unknown): SubscriptionBody {
  const { types, delivery: d } = parseBody(subscriptionBodySchema(), body ?? null, {
    unknownField: 'unknown_field',
    fieldCodes: { types: 'invalid_subscription', delivery: 'invalid_delivery' },
  });
  const unique = [...new Set(types)];
  if (d.mode === 'eventbridge') return { types: unique, mode: d.mode, bus: d.detail_type === undefined ? { event_bus_arn: d.event_bus_arn } : { event_bus_arn: d.event_bus_arn, detail_type: d.detail_type } };
  if (d.mode === 'webhook') return { types: unique, mode: d.mode, url: d.url };
  return { types: unique, mode: d.mode };
}

/** A rotate-secret body takes no fields: any is 400 unknown_field, as on every other route. */
export function parseRotateSecretBody(body: unknown): void {
  parseBody(rotateSecretBodySchema(), body ?? {}, { unknownField: 'unknown_field' });
}

export class Subscriptions {
  constructor(private readonly engine: Engine) {}

  private get kv() {
    return this.engine.kv;
  }

  private now() {
    return this.engine.clock.now();
  }

  /** Creates one; `signing_secret` is in the answer of a webhook subscription, and only there. */
  async create(workspaceId: string, body: unknown): Promise<Subscription & { signing_secret?: string }> {
    const { types, mode, url: sent, bus } = parseSubscriptionBody(body);
    const url = sent === undefined ? undefined : await checkDestination(sent);
    const organizationId = bus ? await this.busOrganization(workspaceId, bus.event_bus_arn) : undefined;
    const id = newId('sub', this.now());
    const created_at = new Date(this.now()).toISOString();
    const stored: StoredSubscription = { subscription_id: id, workspace_id: workspaceId, types, delivery: url ? { mode, url } : bus ? { mode, ...bus } : { mode }, created_at };
    if (organizationId) stored.organization_id = organizationId;
    let secret: string | undefined;
    if (mode === 'webhook') {
      secret = newSigningSecret();
      stored.secrets = [{ sealed: await sealSigningSecret(this.engine.secret, id, secret), created_at, expires_at: null }];
    }
    await this.claimSlot(workspaceId, stored);
    return secret ? { ...subscriptionView(stored), signing_secret: secret } : subscriptionView(stored);
  }

  /** The workspace's organization, once its allow-list holds the bus (eventbridge.ts). */
  private async busOrganization(workspaceId: string, arn: string): Promise<string> {
    const workspace = await new Tenants(this.kv, () => this.now()).getWorkspace(workspaceId);
    if (!workspace) throw new PlatformError('not_found', `No workspace "${workspaceId}".`);
    await checkBusDestination(this.engine, workspace.organization_id, arn, settings().awsEndpointUrl !== undefined);
    return workspace.organization_id;
  }

  async list(workspaceId: string): Promise<StoredSubscription[]> {
    const out: StoredSubscription[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ pk: subscriptionsPartition(workspaceId), sk: { beginsWith: 'sub_' }, cursor });
      for (const item of page.items) out.push(stored(item));
      cursor = page.cursor;
    } while (cursor);
    return out;
  }

  async get(workspaceId: string, id: string): Promise<StoredSubscription> {
    checkSubscriptionId(id);
    const item = await this.kv.get(subscriptionKey(workspaceId, id));
    if (!item) throw subscriptionNotFound(id);
    return stored(item);
  }

  async delete(workspaceId: string, id: string): Promise<void> {
    checkSubscriptionId(id);
    const s = await this.get(workspaceId, id);
    const inbox = s.delivery.mode === 'pull' || s.delivery.mode === 'websocket';
    // Its messages go first, each with its depth: a crash part way leaves the subscription with fewer
    // messages and the counters exact, and the caller's retried DELETE finishes the job. (Deleting the
    // subscription first left the rest of its inbox counted for good, with nothing left to delete it.)
    if (inbox) await removeInbox(this.engine, workspaceId, id);
    try {
      await this.kv.transact([
        { delete: subscriptionKey(workspaceId, id), condition: { ifExists: true } },
        ...(s.slot === undefined ? [] : [{ delete: subscriptionSlotKey(workspaceId, s.slot) }]),
      ]);
    } catch (error) {
      if (error instanceof TransactionCanceledError) throw subscriptionNotFound(id);
      throw error;
    }
    // What a publish wrote meanwhile: that publish removes it too once it sees the subscription gone
    // (publish.ts removeDeleted); removing it here as well keeps a crash of that publisher harmless.
    if (inbox) await removeInbox(this.engine, workspaceId, id);
  }

  /**
   * A new signing secret: the previous ones keep signing for 24 hours (rotating again inside that window
   * keeps every unexpired one). Webhook subscriptions only.
   */
  async rotateSecret(workspaceId: string, id: string): Promise<{ subscription_id: string; signing_secret: string; previous_valid_until: string }> {
    for (let attempt = 1; ; attempt++) {
      const s = await this.get(workspaceId, id);
      if (s.delivery.mode !== 'webhook') throw new PlatformError('wrong_delivery_mode', `A ${s.delivery.mode} subscription has no signing secret.`);
      const secret = newSigningSecret();
      const now = this.now();
      const sealed = await sealSigningSecret(this.engine.secret, id, secret);
      const { secrets, previousValidUntil } = rotate(s.secrets ?? [], sealed, now);
      try {
        // Conditional on the rotation count, a number: the secrets list itself is not compared.
        await this.kv.update({ key: subscriptionKey(workspaceId, id), set: { secrets: secrets as never, rotations: (s.rotations ?? 0) + 1 }, condition: { ifEquals: { rotations: s.rotations ?? 0 } } });
        return { subscription_id: id, signing_secret: secret, previous_valid_until: previousValidUntil };
      } catch (error) {
        if (!(error instanceof ConditionFailedError) || attempt >= MAX_ATTEMPTS) throw error;
        await pause(contentionPauseMs(attempt, 50));
      }
    }
  }

  /** The secrets that sign a delivery now, newest first, opened. */
  async signingSecrets(s: StoredSubscription): Promise<string[]> {
    return Promise.all(liveSecrets(s.secrets ?? [], this.now()).map((x) => openSigningSecret(this.engine.secret, s.subscription_id, x.sealed)));
  }

  /**
   * Stores a new subscription in one of the workspace's MAX_SUBSCRIPTIONS slots, both in one
   * transaction, the slot claimed if absent: never more subscriptions than slots, and concurrent
   * creates take different free slots in parallel instead of queueing on one counter.
   */
  private async claimSlot(workspaceId: string, s: StoredSubscription): Promise<void> {
    const deadline = Date.now() + SLOT_RETRY_BUDGET_MS;
    for (let attempt = 1; ; attempt++) {
      const used = new Set((await this.list(workspaceId)).map((x) => x.slot));
      const free = Array.from({ length: MAX_SUBSCRIPTIONS }, (_, i) => i).filter((i) => !used.has(i));
      if (!free.length) throw new PlatformError('too_many_subscriptions', `A workspace has at most ${MAX_SUBSCRIPTIONS} subscriptions; delete one first.`);
      const slot = free[Math.floor(Math.random() * free.length)];
      const item = { ...subscriptionKey(workspaceId, s.subscription_id), ...(s as unknown as KvItem), slot, ...(s.delivery.mode === 'webhook' ? { rotations: 0 } : {}) };
      try {
        await this.kv.transact([
          { put: { ...subscriptionSlotKey(workspaceId, slot), subscription_id: s.subscription_id }, condition: { ifAbsent: true } },
          { put: item, condition: { ifAbsent: true } },
        ]);
        return;
      } catch (error) {
        if (!(error instanceof TransactionCanceledError)) throw error;
        if (Date.now() > deadline) throw new PlatformError('service_unavailable', 'Too many concurrent subscription creates; retry.');
        await pause(contentionPauseMs(Math.min(attempt, 5), 20));
      }
    }
  }
}

/**
 * A webhook URL at creation: its text (webhook-url.ts), then where it points: every address its host
 * resolves to must be public (it is checked again at every delivery). A host that does not resolve is
 * `invalid_url`.
 */
async function checkDestination(raw: string): Promise<string> {
  const allowLoopback = settings().eventsAllowLoopbackWebhooks === true;
  const url = checkWebhookUrl(raw, { allowLoopback });
  try {
    await resolveDestination(url, { allowLoopback });
  } catch (error) {
    if (error instanceof PlatformError) throw error;
    throw new PlatformError('invalid_url', `The webhook URL's host ${url.hostname} does not resolve.`, 'delivery.url');
  }
  return url.href;
}

function stored(item: KvItem): StoredSubscription {
  const { pk: _pk, sk: _sk, ...rest } = item;
  return rest as unknown as StoredSubscription;
}
