/**
 * How a record is stored and read back. A record item holds the values inline, or, when they are too
 * large for one DynamoDB item (records may be 900 KiB, items 400 KB), a pointer to a body in the blob
 * store written before the transaction that commits the pointer and the version (under a key of its
 * own for every write, `<version>.<random>.json`).
 */
import { pooledRandomBytes } from '../shared/ids.js';
import type { Engine, KvItem } from '../engine/ports.js';
import { itemSize, unstorableValue } from '../engine/item-size.js';
import { recordBodyKey, recordTimeKeys } from './keys.js';
import { droppedFields, type Collection } from './collections.js';
import { RECORD_ID_PATTERN } from './fields/index.js';
import * as z from 'zod/mini';
import { onFirstUse } from '../shared/validate.js';

/** Values up to this size stay in the item; larger ones go to the blob store. */
export const INLINE_BODY_BYTES = 300 * 1024;
export const MAX_RECORD_BYTES = 900 * 1024;
/** Largest record item kept inline, as the store measures it: under DynamoDB's 400 KB with room for the item's keys. */
const INLINE_ITEM_BYTES = 380 * 1024;

export interface RecordMeta {
  id: string;
  version: number;
  created_at: string;
  updated_at: string;
  /** schema_version the record was written under: a field added later has no value in it. */
  sv: number;
  /**
   * Incarnation: random per create, kept by updates. A record deleted and created again starts over at
   * version 1, so a write planned on the old one checks this too (records from before it have none).
   */
  inc?: string;
}

export interface LoadedRecord extends RecordMeta {
  values: Record<string, unknown>;
  /** Blob key of the body when stored outside the item. */
  body: string | null;
}

export type RecordView = Record<string, unknown> & { id: string; version: number; created_at: string; updated_at: string };

/** The Record of the answers (spec 2, view()): its id, version and times, then its own fields, any JSON. */
export const recordViewSchema = onFirstUse(() =>
  z
    .looseObject({
      id: z.string().check(z.regex(RECORD_ID_PATTERN), z.describe('1 to 64 letters, digits, `_`, `-`: the one sent, or a sortable `rec_` id.')),
      version: z.int().check(z.minimum(1), z.describe('Starts at 1, one more on every update; also the answer\'s ETag.')),
      created_at: z.iso.datetime().check(z.describe('ISO 8601 UTC with milliseconds.')),
      updated_at: z.iso.datetime().check(z.describe('ISO 8601 UTC with milliseconds.')),
    })
    .check(z.meta({ id: 'Record', description: "A record: its id, version and times, and its own fields by name (any JSON value in a free collection; declared types in a schema collection). At most 900 KiB." })),
);

/** The values a record holds under the current schema: fields dropped (or dropped and re-added) since it was written are gone. */
const declaredFields = new WeakMap<Collection, Map<string, Collection['fields'][number]>>();

export function visibleValues(collection: Collection, sv: number, values: Record<string, unknown>): Record<string, unknown> {
  let declared = declaredFields.get(collection);
  if (!declared) declaredFields.set(collection, (declared = new Map(collection.fields.map((f) => [f.name, f]))));
  const out: Record<string, unknown> = {};
  for (const k in values) {
    const v = values[k];
    const field = declared.get(k);
    // In a free collection an undeclared key is a free value, unless it is a field dropped after the record was written.
    if (field ? field.generation <= sv : collection.mode === 'free' && droppedAt(collection, k) <= sv) out[k] = v;
  }
  return out;
}

/** The schema_version that dropped field `name` (the latest drop), 0 if none did. */
const dropVersions = new WeakMap<Collection, Map<string, number>>();
function droppedAt(collection: Collection, name: string): number {
  let versions = dropVersions.get(collection);
  if (!versions) dropVersions.set(collection, (versions = new Map(droppedFields(collection).map((d) => [d.name, d.version]))));
  return versions.get(name) ?? 0;
}

/**
 * A record's value of a field, or undefined when it has none. Records are plain objects whose keys
 * are the user's: `values.toString` would be Object.prototype's function, never a value.
 */
export const ownValue = (values: Record<string, unknown>, name: string): unknown => (Object.hasOwn(values, name) ? values[name] : undefined);

export function view(collection: Collection, r: LoadedRecord): RecordView {
  return { id: r.id, version: r.version, created_at: r.created_at, updated_at: r.updated_at, ...visibleValues(collection, r.sv, r.values) };
}

/**
 * The record of an item that holds its values inline; undefined when its body is in the blob store.
 * Written out as one object literal on purpose: building it by spreading a shared helper's object
 * cost lists about a quarter of their throughput (measured: 176 -> 226 µs CPU per list call).
 */
export function inlineRecord(item: KvItem): LoadedRecord | undefined {
  if (typeof item.body === 'string') return undefined;
  return {
    id: String(item.id),
    version: Number(item.version),
    created_at: String(item.created_at),
    updated_at: String(item.updated_at),
    sv: Number(item.sv),
    inc: typeof item.inc === 'string' ? item.inc : undefined,
    values: (item.values as Record<string, unknown>) ?? {},
    body: null,
  };
}

/**
 * Any record item: inline, or with its body read from the blob store. A concurrent update or delete
 * deletes the body this item points at once it commits: then the item is read again and the read
 * follows the new pointer. Undefined when the record was deleted meanwhile.
 */
export async function loadRecord(engine: Engine, item: KvItem): Promise<LoadedRecord | undefined> {
  for (let attempt = 0; ; attempt++) {
    const inline = inlineRecord(item);
    if (inline) return inline;
    const body = item.body as string;
    const blob = await engine.blobs.get(body);
    if (blob) {
      const chunks: Buffer[] = [];
      for await (const chunk of blob.body) chunks.push(chunk as Buffer);
      return { ...inlineRecord({ ...item, body: undefined })!, values: JSON.parse(Buffer.concat(chunks).toString('utf8')), body };
    }
    const now = await engine.kv.get({ pk: item.pk, sk: item.sk });
    if (!now) return undefined;
    // Still the same pointer with no body: not a race but a broken record (a 500 is the truth then).
    if (now.body === body || attempt >= 10) throw new Error(`record body ${body} is missing`);
    item = now;
  }
}

/** The item to commit for a record version; writes the body to the blob store first when it is large. */
export async function recordItem(
  engine: Engine,
  key: { pk: string; sk: string },
  where: { org: string; database: string; collection: string },
  meta: RecordMeta,
  values: Record<string, unknown>,
  serialized: string,
): Promise<{ item: KvItem; bodyKey: string | null }> {
  const bytes = Buffer.byteLength(serialized);
  // In the time indexes, which lists sorted by created_at or updated_at read (record-reads.ts).
  const timeKeys = recordTimeKeys(where.org, where.database, where.collection, meta);
  // Values DynamoDB cannot hold exactly (numbers past 2^53 or under 1e-130, deep nesting, a `__proto__`
  // key) go to a body, which is JSON text and holds any of them, on both engines alike.
  if (bytes <= INLINE_BODY_BYTES && unstorableValue(values, 2) === undefined) {
    // `size`: the values' JSON bytes, so a list can keep its page under its byte budget without measuring.
    const item: KvItem = { ...key, ...timeKeys, ...meta, size: bytes, values: values as never };
    // Decided by the measure the store enforces: DynamoDB counts a list of small numbers at up to 1.5x
    // its JSON, so a 300 KB JSON body can make a 450 KB item.
    if (bytes * 2 <= INLINE_ITEM_BYTES || itemSize(item) <= INLINE_ITEM_BYTES) return { item, bodyKey: null };
  }
  const bodyKey = recordBodyKey(where.org, where.database, where.collection, meta.id, meta.version, pooledRandomBytes(8).toString('hex'));
  await engine.blobs.put(bodyKey, Buffer.from(serialized));
  return { item: { ...key, ...timeKeys, ...meta, body: bodyKey, size: Buffer.byteLength(serialized) }, bodyKey };
}
