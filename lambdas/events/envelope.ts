/**
 * Published events: the body's shape, each event's checks (a bad event is rejected with its code and
 * never blocks the others) and the envelope (spec 2, "Event envelope").
 */
import type { Principal } from '../auth/principal.js';
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { faultOf, onFirstUse, parseBody } from '../shared/validate.js';
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

/** Why a published event was rejected (spec 4.21), in the order the checks run. */
export const REJECTION_CODES = ['invalid_event', 'unknown_field', 'invalid_type', 'invalid_idempotency_key', 'data_required', 'payload_too_large'] as const;
export type RejectionCode = (typeof REJECTION_CODES)[number];

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

/** `evt_` and a ULID in lowercase Crockford base32 (ids.ts). */
export const EVENT_ID_PATTERN = /^evt_[0-9a-z]{26}$/;

/** The envelope's fields (spec 2), shared by the answers that carry one (a pull message adds its own). */
export const envelopeShape = () => ({
  event_id: z.string().check(z.regex(EVENT_ID_PATTERN), z.describe('`evt_` and 26 characters, assigned by the service; sorts by publish time. Receivers deduplicate by it.')),
  type: z.string().check(z.describe('Dotted lowercase words, at most 128 bytes.')),
  source: z.string().check(z.describe("The publishing application's id; an organization-wide credential's own id when no application is bound.")),
  time: z.iso.datetime().check(z.describe('When it was published: RFC 3339 UTC with milliseconds.')),
  tenant: tenantSchema(),
  idempotency_key: z.string().check(z.describe("The publisher's key; the event_id when none was sent.")),
  data: z.unknown().check(z.describe('The JSON value the publisher sent, as sent (`null` included).')),
});

/** The tenant of an event: the organization is its own account in this release. */
export const tenantSchema = onFirstUse(() =>
  z
    .strictObject({
      organization_id: z.string(),
      account_id: z.string().check(z.describe('The organization in this release.')),
      workspace_id: z.string(),
      application_id: z.nullable(z.string().check(z.describe('The publishing application; null for an organization-wide credential.'))),
    })
    .check(z.meta({ id: 'Tenant' })),
);

/** The Event envelope (spec 2): what every delivery carries, webhook body, pull message and stream frame alike. */
export const envelopeSchema = onFirstUse(() => z.strictObject(envelopeShape()).check(z.meta({ id: 'Event' })));

const invalidBody = (message: string) => new PlatformError('invalid_body', message);

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** The request schemas, built at their first use (onFirstUse): only publish calls need them. */
const publishSchemas = onFirstUse(() => {
  const events = `events is an array of 1 to ${MAX_EVENTS_PER_PUBLISH} events.`;
  const body = z.strictObject({
    event: z.optional(z.unknown().check(z.describe('One event.'))),
    events: z.optional(z.array(z.unknown(), { error: events }).check(z.minLength(1, events), z.maxLength(MAX_EVENTS_PER_PUBLISH, events), z.describe('1 to 100 events, in order.'))),
  }).check(z.refine((b) => (b.event === undefined) !== (b.events === undefined), 'The body holds exactly one of "event" or "events".'));

  // Each field's issue maps to the event's rejection code by EVENT_FIELD_CODES; the fields are checked in
  // this order, so the first failing one is its code (an unknown field comes before them all).
  const data = z.unknown().check(
    z.superRefine((value, ctx) => {
      if (value === undefined) ctx.addIssue({ code: 'custom', message: 'data is required.', params: { code: 'data_required' } });
      else if (nestsDeeperThan(value, MAX_DATA_DEPTH)) ctx.addIssue({ code: 'custom', message: `data nests deeper than ${MAX_DATA_DEPTH}.`, params: { code: 'invalid_event' } });
      // 1e400 parses as Infinity and would be delivered as null: refused rather than changed.
      else if (holdsNonFiniteNumber(value)) ctx.addIssue({ code: 'custom', message: 'data holds a number JSON cannot carry.', params: { code: 'invalid_event' } });
    }),
    z.describe('Any JSON value: at most 16 KiB (32 KiB advanced), nesting at most 128.'),
  );
  const fields = z.strictObject({
    type: z.string().check(
      z.refine((t) => Buffer.byteLength(t) <= MAX_TYPE_BYTES && TYPE_PATTERN.test(t), 'type is dotted lowercase words of at most 128 bytes.'),
      z.describe('Dotted lowercase words, at most 128 bytes: `order.paid`.'),
    ),
    tier: z.optional(z.enum(TIERS).check(z.describe('basic (default), reliable or advanced.'))),
    idempotency_key: z.optional(z.string().check(z.regex(IDEMPOTENCY_KEY_PATTERN), z.describe('Printable ASCII, 1 to 256 characters: a publish with the same key within 168 hours is a duplicate.'))),
    data,
  });
  const event = z.pipe(
    fields,
    z.transform((e, ctx) => {
      const tier = e.tier ?? 'basic';
      const dataJson = JSON.stringify(e.data);
      if (Buffer.byteLength(dataJson) > MAX_DATA_BYTES[tier]) {
        ctx.issues.push({ code: 'custom', message: `data is over ${MAX_DATA_BYTES[tier]} bytes.`, params: { code: 'payload_too_large' }, input: e.data });
        return z.NEVER;
      }
      return { type: e.type, dataJson, idempotencyKey: e.idempotency_key, tier } satisfies EventInput;
    }),
  );
  return { body, event };
});

/** POST .../events' body: `{event}` or `{events: [...]}`. */
export const publishBodySchema = () => publishSchemas().body;
/** One published event: `{type, data, idempotency_key?, tier?}`. */
export const eventSchema = () => publishSchemas().event;

/** The code of an event whose field fails, unless the field's check names its own (data: data_required or invalid_event). */
const EVENT_FIELD_CODES: Readonly<Record<string, RejectionCode>> = { type: 'invalid_type', tier: 'invalid_event', idempotency_key: 'invalid_idempotency_key', data: 'invalid_event' };

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
  const parsed = parseBody(publishBodySchema(), body, { unknownField: 'invalid_body' });
  return parsed.events ?? [parsed.event];
}

/**
 * One event's checks: the event, or its rejection code (a bad event is rejected alone, never blocking
 * the others). Not an object: invalid_event; then an unknown field, then the fields in order.
 */
export function checkEvent(raw: unknown): EventInput | RejectionCode {
  const result = z.safeParse(eventSchema(), raw);
  if (result.success) return result.data;
  return faultOf<RejectionCode>(result.error, 'unknown_field', 'invalid_event', EVENT_FIELD_CODES).code;
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
