/**
 * Knowledge collections (spec 2 and 4.9; docs/ai/collections.md; decisions:
 * docs/decisions/knowledge-collections.md): a workspace's named set of items, of a mode fixed for life,
 * kept `standard_30d` and then removed.
 *
 * A collection's `counts` are counters on its item, moved by the writes that move its items (each in
 * the same transaction as the item's own change), so they stay exact under concurrent processing; its
 * `status` is derived from them on every read, so it can never disagree with them.
 *
 * Expiry: the live item carries the store's `expires_at`, so it vanishes from every read the second the
 * collection ends (DynamoDB's TTL removes it on AWS); a small end record answers `410 collection_expired`
 * for a while after that; and a sweep entry, due at the end, removes the collection's data
 * (removeCollectionData: what items add).
 */
import * as z from 'zod/mini';
import type { Principal } from '../auth/principal.js';
import type { Engine, KvItem, KvUpdate, KvWrite } from '../engine/ports.js';
import { TransactionCanceledError } from '../engine/errors.js';
import { AiOrgSettings } from '../ai/org-settings.js';
import { checkReplay, type OperationContext } from '../ai/operations.js';
import { nextPageCursor, openPage, pageQuerySchema } from '../shared/cursors.js';
import { PlatformError } from '../shared/errors.js';
import { holdMs } from '../shared/hold-margin.js';
import { log } from '../shared/log.js';
import type { OperationCall } from '../shared/operations.js';
import { settings } from '../shared/settings.js';
import { onFirstUse, parseBody, parseQuery } from '../shared/validate.js';
import { openVectorDatabase } from '../vector/databases.js';
import { collectionEndKey, collectionKey, collectionsPk, collectionSweepKey, COLLECTION_SWEEP_PARTITION, itemsPk, PROCESSING_PARTITION, sweepDueBefore } from './collection-keys.js';
import { ADMITTED, COLLECTION_MODES, COUNT_ATTRIBUTES, iso, newCollectionId, readCollection, releaseSlotWrite, workspaceOf, type CollectionCounts, type CollectionMode } from './collection-records.js';
import { asItem, itemViewSchema, newestItems, removeItemData, SERVED_ATTRIBUTES, type ItemView } from './items.js';
import { registerIndexWrites } from './index-sweep.js';
import { ENTRIES_HAVE_ITEM } from './chunk-index.js';

export { COLLECTION_MODES, COUNT_ATTRIBUTES, countsWrite, newCollectionId, readCollection, sortableId, workspaceOf } from './collection-records.js';
export type { CollectionCounts, CollectionMode, ItemState } from './collection-records.js';

/** The one retention the spec names; COLLECTION_RETENTION_S shortens it for development. */
export const RETENTION = 'standard_30d';
/** An end set earlier than RETENTION's (an OpenAI vector store's `expires_after`, docs/decisions/openai-vector-stores.md). */
export const CUSTOM_RETENTION = 'custom';
/** How long an expired collection's id answers 410 rather than 404 (then its end record lapses). */
export const EXPIRED_ANSWER_SECONDS = 30 * 24 * 3600;
/** A name as a Data collection's: at most 63 characters (spec 8). */
export const MAX_NAME_CHARS = 63;
export const MAX_COLLECTIONS_PAGE = 100;
const DEFAULT_COLLECTIONS_PAGE = 20;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

const COLLECTION_STATUSES = ['empty', 'indexing', 'ready', 'partial', 'failed'] as const;

/** A collection as the routes answer it: every field of spec 2, plus `object` and `name`. */
export const collectionViewSchema = onFirstUse(() =>
  z.strictObject({
    id: z.string().check(z.regex(/^col_[0-9a-f]{32}$/), z.describe('`col_` and 32 lowercase hex characters: the creation time and 80 random bits, so ids sort by creation.')),
    object: z.literal('collection'),
    name: z.nullable(z.string()).check(z.describe('The name given at creation; null when none was.')),
    mode: z.enum(COLLECTION_MODES).check(z.describe('`download`, `cloud` or `local_vectors`; fixed for life.')),
    retention: z
      .enum([RETENTION, CUSTOM_RETENTION])
      .check(z.describe('`standard_30d`: the collection lives 30 days from its creation (`expires_at`). `custom`: an earlier end was set (an OpenAI vector store\'s `expires_after`), never past those 30 days.')),
    status: z.enum(COLLECTION_STATUSES).check(
      z.describe(
        'Derived from `counts` on every read: `empty` (no items), `indexing` (an item queued or processing), `ready` (every item done), `partial` (some done, some failed), `failed` (every item failed).',
      ),
    ),
    created_at: z.iso.datetime(),
    expires_at: z.iso.datetime().check(z.describe('From then on the collection answers `410 collection_expired` and its data is removed.')),
    counts: z
      .strictObject({ total: z.int(), queued: z.int(), processing: z.int(), done: z.int(), failed: z.int() })
      .check(z.describe('Its items by status: `total` = `queued` + `processing` + `done` + `failed`.')),
    items: z.array(itemViewSchema()).check(z.describe('Its 20 newest items, each as `GET /v1/collections/{id}/items/{item_id}` answers it; empty on creation. `GET /v1/collections/{id}/items` pages through all.')),
  }),
);
export type CollectionStatus = (typeof COLLECTION_STATUSES)[number];

export type CollectionView = z.output<ReturnType<typeof collectionViewSchema>>;

export const collectionListSchema = onFirstUse(() =>
  z.strictObject({ object: z.literal('list'), data: z.array(collectionViewSchema()).check(z.describe('Newest first.')), next_cursor: z.nullable(z.string()).check(z.describe('The next page\'s cursor; null at the end.')) }),
);
export const collectionDeletedSchema = onFirstUse(() => z.strictObject({ id: z.string(), deleted: z.literal(true) }));

/** `GET /v1/collections`'s query: an unknown parameter is `400 unsupported_field`, a bad value `400 invalid_field`. */
export const collectionsQuerySchema = onFirstUse(() => pageQuerySchema({ max: MAX_COLLECTIONS_PAGE, fallback: DEFAULT_COLLECTIONS_PAGE }));

export const createCollectionSchema = onFirstUse(() =>
  z.strictObject({
    mode: z.enum(COLLECTION_MODES).check(z.describe('download, cloud or local_vectors; fixed for life.')),
    name: z.optional(
      z.string().check(
        z.minLength(1),
        z.maxLength(MAX_NAME_CHARS),
        z.refine((s) => !CONTROL.test(s), 'name must hold no control characters'),
        z.describe('A name for people, 1 to 63 characters; not unique.'),
      ),
    ),
  }),
);
export type CreateCollection = z.output<ReturnType<typeof createCollectionSchema>>;

/** POST /v1/collections's body: unknown fields are `unsupported_field`, bad values `invalid_body` naming the field. */
export const parseCreateCollection = (body: unknown): CreateCollection => parseBody(createCollectionSchema(), body, { unknownField: 'unsupported_field' });

/**
 * The status the counts say (docs/ai/collections.md, "Statuses"): no items is `empty`; any item still
 * queued or processing is `indexing`; then every item done is `ready`, some done and some failed
 * `partial`, every one failed `failed`.
 */
export function statusOf(c: CollectionCounts): CollectionStatus {
  if (c.total === 0) return 'empty';
  if (c.queued + c.processing > 0) return 'indexing';
  if (c.failed === 0) return 'ready';
  return c.done > 0 ? 'partial' : 'failed';
}

/** 403 collections_disabled when the organization turned the feature off (`org features --disable collections`). */
export async function checkCollectionsEnabled(engine: Engine, principal: Principal): Promise<void> {
  const org = await new AiOrgSettings(engine.kv, () => engine.clock.now()).get(principal.organizationId);
  if (org.disabled_features.includes('collections')) throw new PlatformError('collections_disabled', 'Knowledge collections are disabled for this organization.');
}

const nowSeconds = (engine: Engine) => Math.floor(engine.clock.now() / 1000);

function countsOf(item: KvItem): CollectionCounts {
  const n = (k: keyof CollectionCounts) => Number(item[COUNT_ATTRIBUTES[k]] ?? 0);
  return { total: n('total'), queued: n('queued'), processing: n('processing'), done: n('done'), failed: n('failed') };
}

export function viewOf(item: KvItem, items: ItemView[] = []): CollectionView {
  const counts = countsOf(item);
  return {
    id: String(item.sk),
    object: 'collection',
    name: typeof item.name === 'string' ? item.name : null,
    mode: item.mode as CollectionMode,
    retention: item.retention === CUSTOM_RETENTION ? CUSTOM_RETENTION : RETENTION,
    status: statusOf(counts),
    created_at: String(item.created_at),
    expires_at: iso(Number(item.ends_at)),
    counts,
    items,
  };
}

/** A create or delete call's claim on its operation id: replayed only to a caller that could make the call (ai/operations.ts). */
export function collectionOperation(engine: Engine, principal: Principal, endpoint: string): OperationCall<OperationContext> {
  const context: OperationContext = { endpoint, route: null, application: principal.applicationId, capability: 'knowledge' };
  return {
    tenant: principal.organizationId,
    holdSeconds: holdMs(30_000) / 1000,
    context,
    checkReplay: (kept) => checkReplay(engine, principal, context, kept),
  };
}

/**
 * POST /v1/collections. A `cloud` collection needs the workspace's vector database (403
 * vector_database_disabled, 409 vector_database_not_created or vector_database_deleting) and names it:
 * its chunks go there. `keep` is the operation's completion write, applied with the collection's, so a
 * crash never leaves a collection its id does not replay.
 */
export async function createCollection(
  engine: Engine,
  principal: Principal,
  request: CreateCollection,
  keep: ((answer: object) => KvUpdate) | undefined,
  opts: CreateCollectionOptions = {},
): Promise<CollectionView> {
  const org = principal.organizationId;
  const workspace = await workspaceOf(engine, principal);
  const database = request.mode === 'cloud' ? await openVectorDatabase(engine, principal) : undefined;
  const nowMs = engine.clock.now();
  const now = Math.floor(nowMs / 1000);
  const id = newCollectionId(nowMs);
  // An earlier end (custom retention) only: never past the spec's 30 days.
  const latest = now + settings().collectionRetentionSeconds;
  const endsAt = opts.endsAt === undefined ? latest : Math.max(now + 1, Math.min(opts.endsAt, latest));
  const item: KvItem = {
    ...collectionKey(org, workspace, id),
    mode: request.mode,
    name: request.name ?? null,
    application_id: principal.applicationId,
    vector_database_id: database?.database_id ?? null,
    // Where its chunks' vectors go: the workspace database's index, or (local_vectors) its own, made at
    // the first vectors the client stores, of their dimensions.
    index: database ? database.index : request.mode === 'local_vectors' ? `kcv-${id.slice(4)}` : null,
    // local_vectors: fixed by the first vectors the client stores (0: none yet).
    dimensions: database ? database.dimensions : 0,
    created_at: iso(now),
    ends_at: endsAt,
    expires_at: endsAt,
    ...(endsAt < latest ? { retention: CUSTOM_RETENTION } : {}),
    // Its chunk entries carry their item (chunk-index.ts): a filtered search may ask the index for some items only.
    [ENTRIES_HAVE_ITEM]: true,
    ...Object.fromEntries([...Object.values(COUNT_ATTRIBUTES), ...Object.values(SERVED_ATTRIBUTES)].map((a) => [a, 0])),
  };
  const view = viewOf(item);
  await engine.kv.transact([
    { put: item, condition: { ifAbsent: true } },
    { put: { ...collectionEndKey(org, workspace, id), ends_at: endsAt, expires_at: endsAt + EXPIRED_ANSWER_SECONDS } },
    { put: { ...collectionSweepKey(endsAt, org, workspace, id), mode: request.mode, vector_database_id: item.vector_database_id ?? null, index: item.index ?? null } },
    // Its chunks go to the workspace's index: the index sweep looks there for entries no item serves.
    ...(database ? registerIndexWrites(engine, org, workspace, database.index) : []),
    ...(opts.extraWrites?.(id, endsAt) ?? []),
    ...(keep ? [keep(view)] : []),
  ]);
  return view;
}

/** What a caller beyond POST /v1/collections may add to a creation: an earlier end, and its own records written in the same transaction. */
export interface CreateCollectionOptions {
  /** Epoch seconds; clamped to the spec's 30 days (and at least a second from now). An earlier end makes the retention `custom`. */
  endsAt?: number;
  /** Writes of the caller's own (an OpenAI vector store's side record), given the new id and its end. */
  extraWrites?: (collectionId: string, endsAt: number) => KvWrite[];
}

/** Renames a live collection (an OpenAI vector store's update), with the caller's writes in the same transaction. */
export async function setCollectionName(engine: Engine, principal: Principal, id: string, name: string | null, extraWrites: KvWrite[] = []): Promise<void> {
  await readCollection(engine, principal, id);
  const workspace = await workspaceOf(engine, principal);
  try {
    await engine.kv.transact([{ update: collectionKey(principal.organizationId, workspace, id), set: { name }, condition: { ifExists: true } }, ...extraWrites]);
  } catch (error) {
    if (error instanceof TransactionCanceledError) await readCollection(engine, principal, id); // gone meanwhile: its 404 or 410
    throw error;
  }
}

/**
 * Moves a live collection's end to `endsAt` (epoch seconds; an OpenAI vector store's `expires_after`),
 * never past its creation + the spec's 30 days nor before a second from now: its item's expiry, its
 * end record and its sweep entry move in one transaction with the caller's writes (given the end in
 * force), so the removal always happens at the end the collection answers. Returns that end.
 */
export async function setCollectionEnd(engine: Engine, principal: Principal, id: string, endsAt: number, extraWrites: (endsAt: number) => KvWrite[] = () => []): Promise<number> {
  for (;;) {
    const item = await readCollection(engine, principal, id);
    const org = principal.organizationId;
    const workspace = await workspaceOf(engine, principal);
    const oldEnd = Number(item.ends_at);
    const latest = Math.floor(Date.parse(String(item.created_at)) / 1000) + settings().collectionRetentionSeconds;
    const end = Math.max(nowSeconds(engine) + 1, Math.min(endsAt, latest));
    const sweep = { mode: item.mode as string, vector_database_id: (item.vector_database_id as string | null) ?? null, index: (item.index as string | null) ?? null };
    const writes: KvWrite[] = [
      { update: collectionKey(org, workspace, id), set: { ends_at: end, expires_at: end, retention: end < latest ? CUSTOM_RETENTION : RETENTION }, condition: { ifEquals: { ends_at: oldEnd } } },
      { put: { ...collectionEndKey(org, workspace, id), ends_at: end, expires_at: end + EXPIRED_ANSWER_SECONDS } },
      ...(end === oldEnd ? [] : [{ delete: collectionSweepKey(oldEnd, org, workspace, id) }]),
      { put: { ...collectionSweepKey(end, org, workspace, id), ...sweep } },
      ...extraWrites(end),
    ];
    try {
      await engine.kv.transact(writes);
      return end;
    } catch (error) {
      if (!(error instanceof TransactionCanceledError)) throw error;
      // Moved by another call meanwhile (look again), or gone (readCollection's 404 or 410).
    }
  }
}

/** GET /v1/collections/{id}. */
export async function getCollection(engine: Engine, principal: Principal, id: string): Promise<CollectionView> {
  const item = await readCollection(engine, principal, id);
  return viewOf(item, await newestItems(engine, principal.organizationId, await workspaceOf(engine, principal), id));
}

/** GET /v1/collections?limit=&cursor=: newest first, with a sealed cursor bound to the organization and workspace. */
export async function listCollections(engine: Engine, principal: Principal, query: Record<string, string>) {
  // A cursor the schema refuses is one openPage would not open either: its `invalid_cursor`.
  parseQuery(collectionsQuerySchema(), query, { unknownParameter: 'unsupported_field', invalid: 'invalid_field', fieldCodes: { cursor: 'invalid_cursor' } });
  const workspace = await workspaceOf(engine, principal);
  const binding = `knowledge-collections\n${principal.organizationId}\n${workspace}`;
  const { limit, position } = await openPage(engine.secret, query, binding, { max: MAX_COLLECTIONS_PAGE, fallback: DEFAULT_COLLECTIONS_PAGE });
  const page = await engine.kv.query({ pk: collectionsPk(principal.organizationId, workspace), descending: true, limit, cursor: position });
  return {
    object: 'list' as const,
    data: await Promise.all(page.items.map(async (c) => viewOf(c, await newestItems(engine, principal.organizationId, workspace, String(c.sk))))),
    next_cursor: await nextPageCursor(engine.secret, page.cursor, binding),
  };
}

/** What removing a collection's data needs to know, from its item or its sweep entry. */
export interface CollectionRef {
  org: string;
  workspace: string;
  id: string;
  mode: CollectionMode;
  vectorDatabaseId: string | null;
  /** Where its chunks' vectors are (null: `download`). */
  index: string | null;
}

/**
 * Removes what a collection holds beyond its own item: each item with its packages, vectors and
 * inline bytes, and a local_vectors collection's own index. Every step is idempotent, so a delete or
 * sweep that dies midway is finished by the next one (docs/decisions/knowledge-collections.md,
 * "Removal"). A processor still at work on an item finds it gone and removes what it made.
 */
export async function removeCollectionData(engine: Engine, ref: CollectionRef): Promise<void> {
  for (;;) {
    const page = await engine.kv.query({ pk: itemsPk(ref.org, ref.workspace, ref.id), limit: 25 });
    if (!page.items.length) break;
    for (const record of page.items) {
      const item = asItem(record);
      await removeItemData(engine, item);
      // Its queued-item slot goes with it, once: the delete is conditioned on the state it was read in
      // (a processor may still move it while the collection exists; then it is read again).
      const slot = releaseSlotWrite(item);
      try {
        await engine.kv.transact([
          { delete: { pk: record.pk, sk: record.sk }, ...(slot.length ? { condition: { ifEquals: { state: item.state, attempt: item.attempt, [ADMITTED]: true } } } : {}) },
          ...slot,
          ...(item.lease_sk ? [{ delete: { pk: PROCESSING_PARTITION, sk: item.lease_sk } }] : []),
        ]);
      } catch (error) {
        if (!(error instanceof TransactionCanceledError)) throw error;
      }
    }
  }
  if (ref.mode === 'local_vectors' && ref.index) await engine.vectors.deleteIndex(ref.index);
}

/**
 * DELETE /v1/collections/{id}: its data first, then its item and end record in one step with its sweep
 * entry moved to now, then its data again (what was added meanwhile), then the entry: a delete that
 * dies midway leaves a collection that a second delete finishes, or a sweep entry the sweep does.
 */
export async function deleteCollection(engine: Engine, principal: Principal, id: string): Promise<{ id: string; deleted: true }> {
  const item = await readCollection(engine, principal, id);
  const org = principal.organizationId;
  const workspace = await workspaceOf(engine, principal);
  const endsAt = Number(item.ends_at);
  const ref: CollectionRef = { org, workspace, id, mode: item.mode as CollectionMode, vectorDatabaseId: (item.vector_database_id as string | null) ?? null, index: (item.index as string | null) ?? null };
  await removeCollectionData(engine, ref);
  // An item added after that removal, before the collection goes, would be left behind: the sweep
  // entry is moved to now, and removed only after a second removal (the sweep finishes a call that dies).
  const dueNow = collectionSweepKey(Math.min(nowSeconds(engine), endsAt - 1), org, workspace, id);
  const writes: KvWrite[] = [
    { delete: collectionKey(org, workspace, id), condition: { ifExists: true } },
    { delete: collectionEndKey(org, workspace, id) },
    { delete: collectionSweepKey(endsAt, org, workspace, id) },
    { put: { ...dueNow, mode: ref.mode, vector_database_id: ref.vectorDatabaseId, index: ref.index } },
  ];
  try {
    await engine.kv.transact(writes);
  } catch (error) {
    // Deleted by a call at the same time, or it expired meanwhile.
    if (error instanceof TransactionCanceledError) await readCollection(engine, principal, id); // its 404 or 410
    throw error;
  }
  // No item can be added now (an add's write needs the collection).
  await removeCollectionData(engine, ref);
  await engine.kv.delete(dueNow);
  return { id, deleted: true };
}

/** Removes the data of collections past their end, oldest first; the number of entries looked at. */
export async function sweepExpiredCollections(engine: Engine, limit = 100): Promise<number> {
  return (await sweepCollectionBatch(engine, limit)).handled;
}

/**
 * One batch of the sweep, from `cursor` (the previous batch's) on: an entry that fails stays due, so a
 * run that batches on continues after it rather than reading the same failing entries again (as the
 * uploads' sweep). `cursor` is absent once nothing more is due.
 */
export async function sweepCollectionBatch(engine: Engine, limit: number, cursor?: string): Promise<{ handled: number; cursor?: string }> {
  const now = nowSeconds(engine);
  const page = await engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION, sk: sweepDueBefore(now + 1), limit, cursor });
  for (const entry of page.items) {
    // One entry that keeps failing must not hold up the others behind it.
    await sweepEntry(engine, entry).catch((error) => log.warn('collection sweep entry failed; retried next sweep', { sk: String(entry.sk), error: String(error) }));
  }
  return { handled: page.items.length, cursor: page.items.length < limit ? undefined : page.cursor };
}

async function sweepEntry(engine: Engine, entry: KvItem): Promise<void> {
  const [, org, workspace, id] = String(entry.sk).split('#');
  await removeCollectionData(engine, { org, workspace, id, mode: entry.mode as CollectionMode, vectorDatabaseId: (entry.vector_database_id as string | null) ?? null, index: (entry.index as string | null) ?? null });
  // Already invisible (past the store's expires_at); removed now rather than whenever the store's TTL gets to it.
  await engine.kv.transact([{ delete: collectionKey(org, workspace, id) }, { delete: { pk: entry.pk, sk: entry.sk } }]);
}
