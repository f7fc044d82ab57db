/**
 * What a collection's items and queries share with the collection itself (collections.ts): its modes,
 * the counters an item's change moves, the organization's queued-item slots, its workspace, sortable
 * ids, and reading the live collection (404, 410). Kept apart so items (items.ts) and the collection routes import it without importing
 * each other.
 */
import { randomBytes } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import type { Engine, KvItem, KvUpdate } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { settings } from '../shared/settings.js';
import { vectorWorkspace } from '../vector/databases.js';
import { collectionEndKey, collectionKey, queuedItemsKey } from './collection-keys.js';

export const COLLECTION_MODES = ['download', 'cloud', 'local_vectors'] as const;
export type CollectionMode = (typeof COLLECTION_MODES)[number];

export interface CollectionCounts {
  total: number;
  queued: number;
  processing: number;
  done: number;
  failed: number;
}

/** The counters' attribute names on the collection's item, for the item writes that move them. */
export const COUNT_ATTRIBUTES: Record<keyof CollectionCounts, string> = {
  total: 'n_total',
  queued: 'n_queued',
  processing: 'n_processing',
  done: 'n_done',
  failed: 'n_failed',
};

/** An item's states, as the counts name them. */
export type ItemState = Exclude<keyof CollectionCounts, 'total'>;

/**
 * The collection's side of an item moving `from` one state `to` another (null `from`: the item is
 * added; null `to`: it is deleted), for the transaction that writes the item's own change: both apply
 * or neither, so the counts stay exact however many consumers run. Conditioned on the collection's
 * item existing, so a write never brings back a collection deleted or expired meanwhile.
 */
export function countsWrite(org: string, workspace: string, id: string, from: ItemState | null, to: ItemState | null): KvUpdate {
  const add: Record<string, number> = {};
  if (from !== null) add[COUNT_ATTRIBUTES[from]] = -1;
  if (to !== null) add[COUNT_ATTRIBUTES[to]] = (add[COUNT_ATTRIBUTES[to]] ?? 0) + 1;
  if (from === null) add[COUNT_ATTRIBUTES.total] = 1;
  if (to === null) add[COUNT_ATTRIBUTES.total] = -1;
  return { update: collectionKey(org, workspace, id), add, condition: { ifExists: true } };
}

/**
 * Admission (docs/decisions/knowledge-fairness.md): an organization has at most
 * KNOWLEDGE_MAX_QUEUED_ITEMS items queued or processing. An item takes a slot in the write that queues
 * it (added or re-processed: `admitted` set, the counter raised only while under the cap) and gives it
 * back in the write that ends it (done, failed, deleted, or removed with its collection), so the
 * counter is exactly the number of items marked admitted, however many writers run. Items queued
 * before admission existed hold no slot and give none back.
 */
export const ADMITTED = 'admitted';

/** The slot write for an item that takes one: refused (its transaction cancelled) at the cap. */
export function admissionWrite(org: string): KvUpdate {
  return { update: queuedItemsKey(org), add: { n: 1 }, condition: { ifBelow: { n: settings().knowledgeMaxQueuedItems } } };
}

/** The write that gives an item's slot back, if it holds one (to go with the write that ends it or takes it away). */
export function releaseSlotWrite(item: { org: string; record: KvItem }): KvUpdate[] {
  return item.record[ADMITTED] === true ? [{ update: queuedItemsKey(item.org), add: { n: -1 } }] : [];
}

/** How long a client refused for the cap waits: items take seconds each, and slots free as they finish. */
export const QUEUE_FULL_RETRY_SECONDS = 5;

export const queueFull = () =>
  new PlatformError(
    'rate_limited',
    `This organization has ${settings().knowledgeMaxQueuedItems} items queued or processing, the most it may have at once; add more as they finish.`,
    { retryAfterSeconds: QUEUE_FULL_RETRY_SECONDS },
  );

/** The workspace a collection belongs to: the key's application's, else the organization's default (as vectors). */
export async function workspaceOf(engine: Engine, principal: Principal): Promise<string> {
  // An organization with no workspace yet keeps its collections under the organization itself, as uploads.
  return (await vectorWorkspace(engine, principal)) ?? '-';
}

/**
 * `<prefix>_` and 32 hex: 6 bytes of the creation time in ms, then 10 random ones (a ULID's 128 bits
 * in hex), so ids sort by creation and listings page in that order: collections (`col`, spec 2), their
 * items (`itm`) and packages (`pkg`).
 */
export function sortableId(prefix: 'col' | 'itm' | 'pkg', nowMs: number): string {
  const time = Buffer.alloc(6);
  time.writeUIntBE(nowMs, 0, 6);
  return `${prefix}_${time.toString('hex')}${randomBytes(10).toString('hex')}`;
}
export const newCollectionId = (nowMs: number) => sortableId('col', nowMs);

/** Spec 2 and 4.10: `col_` and 32 hex. */
const COLLECTION_ID = /^col_[0-9a-f]{32}$/;

const nowSeconds = (engine: Engine) => Math.floor(engine.clock.now() / 1000);
export const iso = (epochSeconds: number) => new Date(epochSeconds * 1000).toISOString();
const notFound = (id: string) => new PlatformError('collection_not_found', `No collection "${id}" in this workspace.`, 'id');
const expired = (id: string, endsAt: number) => new PlatformError('collection_expired', `Collection "${id}" expired at ${iso(endsAt)}; its items and chunks are removed.`, 'id');

/** The live collection `id` of the caller's workspace; 410 past its end; 404 unknown, malformed, another workspace's or organization's. */
export async function readCollection(engine: Engine, principal: Principal, id: string): Promise<KvItem> {
  if (!COLLECTION_ID.test(id)) throw notFound(id);
  const org = principal.organizationId;
  const workspace = await workspaceOf(engine, principal);
  const [live, end] = await engine.kv.getMany([collectionKey(org, workspace, id), collectionEndKey(org, workspace, id)]);
  if (live && Number(live.ends_at) > nowSeconds(engine)) return live;
  if (end && Number(end.ends_at) <= nowSeconds(engine)) throw expired(id, Number(end.ends_at));
  throw notFound(id);
}
