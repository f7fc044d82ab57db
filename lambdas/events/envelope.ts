/**
 * Published events: the body's shape, each event's checks (a bad event is rejected with its code and
 * never blocks the others) and the envelope (spec 2, "Event envelope").
 */
import type { Principal } from '../auth/principal.js';
import { PlatformError } from '../shared/errors.js';
import { holdsNonFiniteNumber, nestsDeeperThan } from '../shared/json-depth.js';

export const MAX_EVENTS_PER_PUBLISH = 100;
export const TIERS = ['basic', 'reliable', 'advanced'] as const;
export type Tier = (typeof TIERS)[number];
/** Spec 4.21: data of at most 16 KiB (basic, reliable) or 32 KiB (advanced), as JSON bytes. */
export const MAX_DATA_BYTES: Record<Tier, number> = { basic: 16 * 1024, reliable: 16 * 1024, advanced: 32 * 1024 };
/**
 * Deepest nesting of an event's data (the data itself level 1, each `[` or `{` one more); deeper is the
 * event's `invalid_event`. Above the Data API's 64 so that a platform event wrapping a record of the
 * deepest kind ({database, collection, record: {...}}) fits. Checked without recursion, before
 * the data is printed (JSON.stringify recurses).
 */
export const MAX_DATA_DEPTH = 128;
const MAX_TYPE_BYTES = 128;
/** Dotted lowercase words: `order.paid`, `record.created`, `order.item_added`. */
const TYPE_PATTERN = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*$/;
/** Printable ASCII, 1 to 256 characters: it names an item key and travels in headers and logs. */
const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,256}$/;
const EVENT_FIELDS = new Set(['type', 'data', 'idempotency_key', 'tier']);

export type RejectionCode = 'invalid_event' | 'unknown_field' | 'invalid_type' | 'invalid_idempotency_key' | 'payload_too_large' | 'data_required';

export interface EventInput {
  type: string;
  /** The data as the JSON text that goes out in every delivery. */
  dataJson: string;
  idempotencyKey?: string;
  tier: Tier;
}

export interface Tenant {
  organization_id: string;
  account_id: string;
  workspace_id: string;
  application_id: string | null;
}

export interface Envelope {
  event_id: string;
  type: string;
  source: string;
  time: string;
  tenant: Tenant;
  idempotency_key: string;
  data: unknown;
}

const invalidBody = (message: string) => new PlatformError('invalid_body', message);

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/**
 * The body's events, in order: `{event}` or `{events: [1..100]}`. Anything else, and `source` anywhere
 * in the body (the service sets it from the credential), is the whole call's `400 invalid_body`.
 */
export function eventsOf(body: unknown): unknown[] {
  if (!isObject(body)) throw invalidBody('The body is {"event": {...}} or {"events": [...]}.');
  const events = Object.hasOwn(body, 'events') ? body.events : Object.hasOwn(body, 'event') ? [body.event] : undefined;
  if (Object.hasOwn(body, 'source') || (Array.isArray(events) && events.some((e) => isObject(e) && Object.hasOwn(e, 'source')))) {
    throw invalidBody('source is set by the service from the credential; leave it out.');
  }
  const keys = Object.keys(body);
  if (keys.length !== 1 || (keys[0] !== 'event' && keys[0] !== 'events')) throw invalidBody('The body holds exactly one of "event" or "events".');
  if (!Array.isArray(events) || events.length < 1 || events.length > MAX_EVENTS_PER_PUBLISH) {
    throw invalidBody(`events is an array of 1 to ${MAX_EVENTS_PER_PUBLISH} events.`);
  }
  return events;
}

/** One event's checks, in a fixed order; the first failing one is its rejection code. */
export function checkEvent(raw: unknown): EventInput | RejectionCode {
  if (!isObject(raw)) return 'invalid_event';
  const e = raw;
  if (Object.keys(e).some((k) => !EVENT_FIELDS.has(k))) return 'unknown_field';
  if (typeof e.type !== 'string' || Buffer.byteLength(e.type) > MAX_TYPE_BYTES || !TYPE_PATTERN.test(e.type)) return 'invalid_type';
  if (e.tier !== undefined && !(TIERS as readonly unknown[]).includes(e.tier)) return 'invalid_event';
  const tier = (e.tier ?? 'basic') as Tier;
  if (e.idempotency_key !== undefined && (typeof e.idempotency_key !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(e.idempotency_key))) return 'invalid_idempotency_key';
  if (!Object.hasOwn(e, 'data') || e.data === undefined) return 'data_required';
  if (nestsDeeperThan(e.data, MAX_DATA_DEPTH)) return 'invalid_event';
  // 1e400 parses as Infinity and would be delivered as null: refused rather than changed.
  if (holdsNonFiniteNumber(e.data)) return 'invalid_event';
  const dataJson = JSON.stringify(e.data);
  if (Buffer.byteLength(dataJson) > MAX_DATA_BYTES[tier]) return 'payload_too_large';
  return { type: e.type, dataJson, idempotencyKey: e.idempotency_key as string | undefined, tier };
}

/**
 * The tenant of an event from the credential and the path's (already authorized) workspace. The
 * organization is the account in this release (docs/events/design.md "Accounts").
 */
export function tenantOf(principal: Principal, workspaceId: string): Tenant {
  return { organization_id: principal.organizationId, account_id: principal.organizationId, workspace_id: workspaceId, application_id: principal.applicationId };
}

/** `source`: the publishing application, or the organization-wide credential when none is bound. */
export const sourceOf = (principal: Principal) => principal.applicationId ?? principal.credentialId;

/** The envelope as JSON text, with the data's text spliced in as sent (never parsed and printed again). */
export function envelopeJson(e: Omit<Envelope, 'data'>, dataJson: string): string {
  const head = JSON.stringify({ event_id: e.event_id, type: e.type, source: e.source, time: e.time, tenant: e.tenant, idempotency_key: e.idempotency_key });
  return `${head.slice(0, -1)},"data":${dataJson}}`;
}
