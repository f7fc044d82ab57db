/**
 * The ledger: what the vector database knows beside its index (docs/decisions/vector-database.md). The
 * index (Engine.vectors) has no transactions; the ledger in the key-value store makes each write a
 * transaction of its own, seen whole or not at all, and survives a writer killed at any point:
 *
 * - Writers of one scope take turns under a lease and number their transactions; the scope's head
 *   item holds the last committed number. Committing is one conditional write of the head.
 * - Every ledger item a transaction writes (passage, document, member) carries the transaction's
 *   number and the version it replaces (`prev`). A reader takes the head first: an item of a later
 *   transaction is read as its `prev`, so it sees the scope as of one commit.
 * - Index entries are written under fresh keys before the ledger names them, so an entry no
 *   committed passage names is never a hit; what a transaction replaced is removed after its commit.
 * - The next writer rolls back a transaction whose writer died before its commit (restoring every
 *   `prev`), or finishes the cleanup of one that died after it, from the intent it left.
 */
import { randomBytes } from 'node:crypto';
import type { Engine, KvCheck, KvItem, KvKey, KvWrite, VectorEntry } from '../engine/ports.js';
import { VECTOR_BATCH_MAX } from '../engine/ports.js';
import { ConditionFailedError, TransactionCanceledError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { ulid } from '../shared/ids.js';
import { databaseKey, documentPk, headKey, intentPk, leaseKey, memberPk, passagePk, scopeRegistryPk } from './keys.js';
import { contentSha256, filterableOf, type Passage, type Skipped } from './passages.js';
import type { VectorDatabase } from './types.js';
import { encodePayload } from './payload.js';

/** A version of a passage: its index entry, the document generation it belongs to, and the transaction that wrote it. */
export interface Version {
  vkey: string;
  doc: string | null;
  gen: number | null;
  bytes: number;
  text_sha256: string;
  txn: number;
}

export interface PassageItem extends Version {
  id: string;
  prev: Version | null;
}

export interface DocumentVersion {
  generation: number;
  deleted: boolean;
  passages: number;
  bytes: number;
  content_sha256: string;
  updated_at: string;
  txn: number;
}

interface DocumentItem extends DocumentVersion {
  prev: DocumentVersion | null;
}

export type DocumentState = DocumentVersion & { document_id: string };

/**
 * A writer's turn: long enough for a commit of 100 passages on DynamoDB with room to spare, short
 * enough that a dead writer holds its scope up only briefly (its turn ends, the next one recovers).
 * A writer slower than this writes nothing more: every ledger transaction checks the lease.
 */
const LEASE_SECONDS = 15;
/** How long a writer waits for its turn before answering 503. */
const LEASE_WAIT_MS = 20_000;
/** Passages per ledger transaction: each is its item and its member, plus the lease check. */
const PER_TRANSACTION = 49;
const GEN_WIDTH = 16;
const genPrefix = (gen: number) => `${String(gen).padStart(GEN_WIDTH, '0')}#`;
const memberSk = (gen: number, id: string) => `${genPrefix(gen)}${id}`;
const TXN_WIDTH = 16;

const chunks = <T>(list: readonly T[], size: number): T[][] => Array.from({ length: Math.ceil(list.length / size) }, (_, i) => list.slice(i * size, (i + 1) * size));

const ignoreConflict = (error: unknown) => {
  if (!(error instanceof ConditionFailedError || error instanceof TransactionCanceledError)) throw error;
};

// ---------- reading ----------

const versionOf = (v: Record<string, unknown> | null | undefined): Version | null =>
  v && typeof v.vkey === 'string'
    ? { vkey: v.vkey, doc: (v.doc as string | null) ?? null, gen: (v.gen as number | null) ?? null, bytes: Number(v.bytes ?? 0), text_sha256: String(v.text_sha256 ?? ''), txn: Number(v.txn ?? 0) }
    : null;

function passageItemOf(item: KvItem | undefined): PassageItem | undefined {
  const current = versionOf(item as Record<string, unknown> | undefined);
  return current ? { ...current, id: item!.sk, prev: versionOf(item!.prev as Record<string, unknown> | null) } : undefined;
}

const documentVersionOf = (v: Record<string, unknown> | null | undefined): DocumentVersion | null =>
  v && typeof v.generation === 'number'
    ? {
        generation: v.generation,
        deleted: v.deleted === true,
        passages: Number(v.passages ?? 0),
        bytes: Number(v.bytes ?? 0),
        content_sha256: String(v.content_sha256 ?? ''),
        updated_at: String(v.updated_at ?? ''),
        txn: Number(v.txn ?? 0),
      }
    : null;

function documentItemOf(item: KvItem | undefined): DocumentItem | undefined {
  const current = documentVersionOf(item as Record<string, unknown> | undefined);
  return current ? { ...current, prev: documentVersionOf(item!.prev as Record<string, unknown> | null) } : undefined;
}

/** What a reader at snapshot `committed` sees of an item: itself, or for a later transaction's item, the version it replaced. */
function asOf<T extends { txn: number }>(item: (T & { prev: T | null }) | undefined, committed: number): T | undefined {
  if (!item) return undefined;
  if (item.txn <= committed) return item;
  return item.prev ?? undefined;
}

async function getMany(engine: Engine, keys: KvKey[]): Promise<(KvItem | undefined)[]> {
  const out: (KvItem | undefined)[] = [];
  for (const part of chunks(keys, 100)) out.push(...(await engine.kv.getMany(part)));
  return out;
}

/** The scope's last committed transaction: a reader's snapshot. */
export async function readHead(engine: Engine, db: string, scope: string): Promise<number> {
  return Number((await engine.kv.get(headKey(db, scope)))?.committed ?? 0);
}

async function readPassageItems(engine: Engine, db: string, scope: string, ids: readonly string[]): Promise<Map<string, PassageItem | undefined>> {
  const list = [...new Set(ids)];
  const items = await getMany(engine, list.map((id) => ({ pk: passagePk(db, scope), sk: id })));
  return new Map(list.map((id, i) => [id, passageItemOf(items[i])]));
}

async function readDocumentItems(engine: Engine, db: string, scope: string, ids: Iterable<string>): Promise<Map<string, DocumentItem | undefined>> {
  const list = [...new Set(ids)];
  const items = await getMany(engine, list.map((id) => ({ pk: documentPk(db, scope), sk: id })));
  return new Map(list.map((id, i) => [id, documentItemOf(items[i])]));
}

const live = (version: Version, documents: Map<string, DocumentVersion | undefined>): boolean => {
  if (version.doc === null) return true;
  const document = documents.get(version.doc);
  return !!document && !document.deleted && document.generation === version.gen;
};

/** A snapshot's view of some passages: the version of each a reader sees (none: not visible). */
async function visibleVersions(engine: Engine, db: string, scope: string, ids: readonly string[], committed: number): Promise<Map<string, Version | undefined>> {
  const items = await readPassageItems(engine, db, scope, ids);
  const versions = new Map([...items].map(([id, item]) => [id, asOf(item, committed)]));
  const documentIds = new Set<string>();
  for (const v of versions.values()) if (v?.doc) documentIds.add(v.doc);
  const documentItems = await readDocumentItems(engine, db, scope, documentIds);
  const documents = new Map([...documentItems].map(([id, item]) => [id, asOf(item, committed)]));
  return new Map([...versions].map(([id, v]) => [id, v && live(v, documents) ? v : undefined]));
}

/** Which of `hits` (an index entry's key and passage id) are what a reader at `committed` sees. */
export async function visibleHits(engine: Engine, db: string, scope: string, hits: readonly { key: string; id: string }[], committed: number): Promise<boolean[]> {
  const versions = await visibleVersions(engine, db, scope, hits.map((h) => h.id), committed);
  return hits.map((h) => versions.get(h.id)?.vkey === h.key);
}

/** A page of the scope's documents as of its head, deleted ones left out. */
export async function listDocuments(engine: Engine, db: string, scope: string, limit: number, cursor: string | undefined): Promise<{ data: DocumentState[]; cursor?: string }> {
  const committed = await readHead(engine, db, scope);
  const data: DocumentState[] = [];
  let next = cursor;
  do {
    const query = { pk: documentPk(db, scope), limit: limit - data.length, cursor: next };
    const page = await engine.kv.query(query);
    for (const [i, item] of page.items.entries()) {
      const document = asOf(documentItemOf(item), committed);
      if (!document || document.deleted) continue;
      data.push({ document_id: item.sk, ...document });
      if (data.length === limit) return { data, cursor: i === page.items.length - 1 && !page.cursor ? undefined : engine.kv.cursorAfter(query, item) };
    }
    next = page.cursor;
  } while (next);
  return { data };
}

// ---------- the scope's write lease ----------

interface Turn {
  /** The check every ledger transaction of the turn carries: a writer whose lease ran out writes nothing more. */
  check: KvCheck;
  committed: number;
}

/** Runs `work` as the scope's only writer, after finishing or undoing what a dead writer left; 503 when the turn does not come. */
async function underLease<T>(engine: Engine, database: VectorDatabase, scope: string, work: (turn: Turn) => Promise<T>, options: { recover: boolean } = { recover: true }): Promise<T> {
  const owner = randomBytes(12).toString('hex');
  const key = leaseKey(database.database_id, scope);
  const started = Date.now();
  for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
    try {
      await engine.kv.put({ ...key, owner, expires_at: Math.floor(engine.clock.now() / 1000) + LEASE_SECONDS }, { ifAbsent: true });
      break;
    } catch (error) {
      if (!(error instanceof ConditionFailedError)) throw error;
      if (Date.now() - started > LEASE_WAIT_MS) {
        throw new PlatformError('service_unavailable', 'Other writes to this scope are in progress; retry shortly.', { retryAfterSeconds: 1 });
      }
      await new Promise((resolve) => setTimeout(resolve, wait + Math.random() * wait));
    }
  }
  try {
    const turn: Turn = { check: { check: key, condition: { ifEquals: { owner } } }, committed: await readHead(engine, database.database_id, scope) };
    if (options.recover) await recover(engine, database, scope, turn);
    return await work(turn);
  } finally {
    await engine.kv.delete(key, { ifEquals: { owner } }).catch(() => undefined);
  }
}

// ---------- intents ----------

/** What a transaction writes, kept before it writes anything, so another writer can undo or finish it. */
interface Intent {
  txn: number;
  /** Entries written: [key, passage id]. */
  adds: [string, string][];
  /** Passage items, member items and documents written (undone on rollback). */
  passages: string[];
  members: [string, string][];
  documents: string[];
  /** After the commit: members of passages that left their document. */
  moved: [string, string][];
  /** After the commit: documents whose older generations go (null: the whole document, deleted). */
  flips: [string, number | null][];
  /** After the commit: entries replaced ([key, passage id]), removed once no passage names them. */
  drops: [string, string][];
}

const intentKey = (db: string, scope: string, txn: number): KvKey => ({ pk: intentPk(db, scope), sk: String(txn).padStart(TXN_WIDTH, '0') });

async function recover(engine: Engine, database: VectorDatabase, scope: string, turn: Turn): Promise<void> {
  const db = database.database_id;
  for (;;) {
    const page = await engine.kv.query({ pk: intentPk(db, scope), limit: 10 });
    if (!page.items.length) return;
    for (const item of page.items) {
      const intent = item.intent as unknown as Intent;
      if (intent.txn <= turn.committed) await finish(engine, database, scope, intent);
      else await rollBack(engine, database, scope, intent, turn);
    }
  }
}

/** Puts each item back as it was before transaction `txn` (or removes it when it did not exist). */
async function restore(engine: Engine, keys: KvKey[], txn: number, turn: Turn): Promise<void> {
  const items = await getMany(engine, keys);
  for (const [i, item] of items.entries()) {
    if (!item || Number(item.txn) !== txn) continue;
    const prev = item.prev as Record<string, unknown> | null;
    const write: KvWrite = prev ? { put: { ...keys[i], ...(prev as Record<string, never>), prev: null } } : { delete: keys[i] };
    await engine.kv.transact([turn.check, write]);
  }
}

async function rollBack(engine: Engine, database: VectorDatabase, scope: string, intent: Intent, turn: Turn): Promise<void> {
  const db = database.database_id;
  await restore(engine, intent.passages.map((id) => ({ pk: passagePk(db, scope), sk: id })), intent.txn, turn);
  await restore(engine, intent.members.map(([doc, sk]) => ({ pk: memberPk(db, scope, doc), sk })), intent.txn, turn);
  await restore(engine, intent.documents.map((id) => ({ pk: documentPk(db, scope), sk: id })), intent.txn, turn);
  await dropUnnamed(engine, database, scope, intent.adds);
  await engine.kv.delete(intentKey(db, scope, intent.txn));
}

/** The cleanup after a commit: what no reader can see any more goes. Safe to run twice. */
async function finish(engine: Engine, database: VectorDatabase, scope: string, intent: Intent): Promise<void> {
  const db = database.database_id;
  for (const [doc, sk] of intent.moved) await engine.kv.delete({ pk: memberPk(db, scope, doc), sk });
  const drops = [...intent.drops];
  for (const [doc, gen] of intent.flips) drops.push(...(await removeOlderGenerations(engine, db, scope, doc, gen)));
  await dropUnnamed(engine, database, scope, drops);
  await engine.kv.delete(intentKey(db, scope, intent.txn));
}

/**
 * Removes the entries of `pairs` ([key, passage id]) that no passage item names as its own version.
 * Runs only when no transaction is open (after a commit, or a rollback): a `prev` is then what
 * readers of an older snapshot saw, and a reader whose snapshot moved during its query starts over.
 */
async function dropUnnamed(engine: Engine, database: VectorDatabase, scope: string, pairs: readonly (readonly [string, string])[]): Promise<void> {
  if (!pairs.length) return;
  const items = await readPassageItems(engine, database.database_id, scope, pairs.map(([, id]) => id));
  const unnamed = pairs.filter(([vkey, id]) => items.get(id)?.vkey !== vkey);
  for (const part of chunks([...new Set(unnamed.map(([vkey]) => vkey))], VECTOR_BATCH_MAX)) await engine.vectors.delete(database.index, part);
}

/**
 * Deletes the members of `doc` below `generation` (all of them for null) and the passage items still
 * naming them; returns their entries, to remove.
 */
async function removeOlderGenerations(engine: Engine, db: string, scope: string, doc: string, generation: number | null): Promise<[string, string][]> {
  const dropped: [string, string][] = [];
  for (;;) {
    const page = await engine.kv.query({ pk: memberPk(db, scope, doc), sk: generation === null ? undefined : { lt: genPrefix(generation) }, limit: 100 });
    if (!page.items.length) return dropped;
    const ids = page.items.map((m) => m.sk.slice(GEN_WIDTH + 1));
    const items = await readPassageItems(engine, db, scope, ids);
    for (const [i, member] of page.items.entries()) {
      const item = items.get(ids[i]);
      if (item && item.doc === doc && item.gen === Number(member.sk.slice(0, GEN_WIDTH))) {
        await engine.kv.delete({ pk: passagePk(db, scope), sk: ids[i] }, { ifEquals: { vkey: item.vkey } }).catch(ignoreConflict);
        dropped.push([item.vkey, ids[i]]);
      }
      await engine.kv.delete({ pk: member.pk, sk: member.sk });
    }
  }
}

/** A database being deleted takes no more writes: what a write found deleting answers. */
const deleting = () => new PlatformError('vector_database_deleting', "This workspace's vector database is being deleted; nothing was stored.");

/**
 * A transaction's first write: its intent and the scope's place in the database's registry, only
 * while the database is active and this writer holds the lease. A removal job clears a scope under
 * its lease, so a writer either commits before it or writes nothing.
 */
async function beginTransaction(engine: Engine, database: VectorDatabase, scope: string, turn: Turn, intent: Intent): Promise<void> {
  try {
    await engine.kv.transact([
      turn.check,
      { check: databaseKey(database.workspace_id), condition: { ifEquals: { database_id: database.database_id, state: 'active' } } },
      { put: { ...intentKey(database.database_id, scope, intent.txn), intent: intent as unknown as Record<string, never> } },
      { put: { pk: scopeRegistryPk(database.database_id), sk: scope } },
    ]);
  } catch (error) {
    if (error instanceof TransactionCanceledError) throw deleting();
    throw error;
  }
}

/** Deletes every item of partition `pk`, 25 at a time. */
async function clearPartition(engine: Engine, pk: string): Promise<void> {
  for (;;) {
    const page = await engine.kv.query({ pk, limit: 25 });
    if (!page.items.length) return;
    await Promise.all(page.items.map((item) => engine.kv.delete({ pk: item.pk, sk: item.sk })));
  }
}

/**
 * Removes a scope of a database being deleted, under the scope's lease: a writer in its turn finishes
 * first, and one after it writes nothing (beginTransaction). The index itself is the caller's.
 */
export async function clearScope(engine: Engine, database: VectorDatabase, scope: string): Promise<void> {
  const db = database.database_id;
  await underLease(
    engine,
    database,
    scope,
    async () => {
      for (;;) {
        const documents = await engine.kv.query({ pk: documentPk(db, scope), limit: 25 });
        if (!documents.items.length) break;
        for (const document of documents.items) {
          await clearPartition(engine, memberPk(db, scope, document.sk));
          await engine.kv.delete({ pk: document.pk, sk: document.sk });
        }
      }
      await clearPartition(engine, passagePk(db, scope));
      await clearPartition(engine, intentPk(db, scope));
      await engine.kv.delete(headKey(db, scope));
      await engine.kv.delete({ pk: scopeRegistryPk(db), sk: scope });
    },
    { recover: false },
  );
}

// ---------- commits ----------

/**
 * A passage of the call, with its vector as the embedding route answered it; without one when an
 * early look at its document refused it (the commit decides again, and asks for its vector if the
 * document changed meanwhile).
 */
export interface EmbeddedPassage extends Passage {
  vector?: Float32Array;
}

interface Decision {
  target: number;
  /** The document moves to a new generation (its other passages disappear with the commit). */
  flips: boolean;
  skip?: 'stale_generation' | 'document_deleted';
}

/**
 * The generation each passage's document will be at, or why it cannot be stored (docs/ai/vector.md):
 * a lower generation than the document's is stale; a deleted document takes only a higher one; a
 * passage with no generation joins the current one (1 for a new document); of one document's
 * passages in one call, those below the highest generation sent are stale.
 */
export function decideGenerations(passages: readonly Passage[], documents: Map<string, DocumentVersion | undefined>): { decisions: Map<string, Decision>; skipped: Skipped[] } {
  const requested = (p: Passage) => p.generation ?? documents.get(p.document_id!)?.generation ?? 1;
  const decisions = new Map<string, Decision>();
  for (const p of passages) {
    if (p.document_id === null) continue;
    decisions.set(p.document_id, { target: Math.max(decisions.get(p.document_id)?.target ?? 0, requested(p)), flips: false });
  }
  for (const [id, decision] of decisions) {
    const current = documents.get(id);
    if (current?.deleted && decision.target <= current.generation) decision.skip = 'document_deleted';
    else if (current && !current.deleted && decision.target < current.generation) decision.skip = 'stale_generation';
    else decision.flips = !current || current.deleted || decision.target > current.generation;
  }
  const skipped: Skipped[] = [];
  for (const p of passages) {
    if (p.document_id === null) continue;
    const decision = decisions.get(p.document_id)!;
    if (decision.skip) skipped.push({ index: p.index, id: p.id, reason: decision.skip });
    else if (requested(p) < decision.target) skipped.push({ index: p.index, id: p.id, reason: 'stale_generation' });
  }
  return { decisions, skipped };
}

/** The current state of the documents `ids` name, for a check before the embeddings call (the commit decides again). */
export async function currentDocuments(engine: Engine, db: string, scope: string, ids: Iterable<string>): Promise<Map<string, DocumentVersion | undefined>> {
  const committed = await readHead(engine, db, scope);
  const items = await readDocumentItems(engine, db, scope, ids);
  return new Map([...items].map(([id, item]) => [id, asOf(item, committed)]));
}

const payloadOf = (p: Passage, scope: 'shared' | 'local'): string => encodePayload({ id: p.id, text: p.text, metadata: p.metadata, scope, document_id: p.document_id });

export type CommitResult =
  | { ingested: number; skipped: Skipped[] }
  /** Passages the commit would store that have no vector yet: nothing was written; embed them and commit again. */
  | { embed: Passage[] };

/** A document's state at `generation`, from its members of that generation (less those that left it). */
async function recount(engine: Engine, db: string, scope: string, doc: string, generation: number, leaving: ReadonlySet<string>): Promise<Pick<DocumentVersion, 'passages' | 'bytes' | 'content_sha256'>> {
  const members: { id: string; text_sha256: string; bytes: number }[] = [];
  let cursor: string | undefined;
  do {
    const page = await engine.kv.query({ pk: memberPk(db, scope, doc), sk: { beginsWith: genPrefix(generation) }, cursor });
    for (const m of page.items) if (!leaving.has(m.sk)) members.push({ id: m.sk.slice(GEN_WIDTH + 1), text_sha256: String(m.text_sha256), bytes: Number(m.bytes ?? 0) });
    cursor = page.cursor;
  } while (cursor);
  return { passages: members.length, bytes: members.reduce((n, m) => n + m.bytes, 0), content_sha256: contentSha256(members) };
}

/**
 * The commit point: the head moves to `txn` (everything the transaction wrote becomes what readers
 * see) with the database's counts, if the writer still holds the lease.
 */
async function commit(engine: Engine, database: VectorDatabase, scope: string, turn: Turn, txn: number, counts: { passages: number; bytes: number }): Promise<void> {
  try {
    await engine.kv.transact([
      turn.check,
      { update: headKey(database.database_id, scope), set: { committed: txn } },
      { update: databaseKey(database.workspace_id), add: counts, condition: { ifEquals: { database_id: database.database_id, state: 'active' } } },
    ]);
  } catch (error) {
    if (error instanceof TransactionCanceledError) throw new PlatformError('vector_database_deleting', "This workspace's vector database is being deleted, or this write lost its turn; nothing was stored.");
    throw error;
  }
}

/**
 * Stores `passages` in the scope as one transaction: entries first (named by nothing yet), the
 * intent, the passage and member items, each document touched with its new generation and counts,
 * then the commit, then the cleanup of what the commit replaced.
 */
export async function commitPassages(engine: Engine, database: VectorDatabase, scope: 'shared' | 'local', scopeTag: string, passages: readonly EmbeddedPassage[]): Promise<CommitResult> {
  const db = database.database_id;
  return underLease(engine, database, scopeTag, async (turn) => {
    const now = engine.clock.now();
    const txn = turn.committed + 1;
    const items = await readPassageItems(engine, db, scopeTag, passages.map((p) => p.id));
    const documentIds = new Set<string>(passages.flatMap((p) => (p.document_id ? [p.document_id] : [])));
    for (const item of items.values()) if (item?.doc) documentIds.add(item.doc);
    const documentItems = await readDocumentItems(engine, db, scopeTag, documentIds);
    // No other transaction is open under the lease: what is stored is what readers see.
    const documents = new Map<string, DocumentVersion | undefined>([...documentItems]);
    const { decisions, skipped } = decideGenerations(passages, documents);
    const skippedIndexes = new Set(skipped.map((s) => s.index));
    const stored = passages.filter((p) => !skippedIndexes.has(p.index));
    const unembedded = stored.filter((p) => !p.vector);
    if (unembedded.length) return { embed: unembedded };
    if (!stored.length) return { ingested: 0, skipped };

    const intent: Intent = { txn, adds: [], passages: [], members: [], documents: [], moved: [], flips: [], drops: [] };
    const entries: VectorEntry[] = [];
    const writes: KvWrite[][] = [];
    /** Member keys of passages leaving their document, per document. */
    const leaving = new Map<string, Set<string>>();
    const counts = { passages: 0, bytes: 0 };
    for (const p of stored) {
      const vkey = `v${ulid(now).toLowerCase()}${randomBytes(5).toString('hex')}`;
      const old = items.get(p.id);
      const visible = old && live(old, documents) ? old : undefined;
      const gen = p.document_id === null ? null : decisions.get(p.document_id)!.target;
      const version: Version = { vkey, doc: p.document_id, gen, bytes: p.bytes, text_sha256: p.text_sha256, txn };
      entries.push({ key: vkey, vector: p.vector!, filterable: { ...filterableOf(p.metadata), scope: scopeTag }, payload: payloadOf(p, scope) });
      intent.adds.push([vkey, p.id]);
      intent.passages.push(p.id);
      if (old) intent.drops.push([old.vkey, p.id]);
      const { id: _id, prev: _prev, ...oldVersion } = old ?? { id: '', prev: null };
      const group: KvWrite[] = [{ put: { pk: passagePk(db, scopeTag), sk: p.id, ...version, prev: old ? (oldVersion as unknown as Record<string, never>) : null } }];
      if (p.document_id !== null) {
        const sk = memberSk(gen!, p.id);
        // The member it replaces, if the passage was already in this generation of the document.
        const prior = old && old.doc === p.document_id && old.gen === gen ? { text_sha256: old.text_sha256, bytes: old.bytes, txn: old.txn } : null;
        group.push({ put: { pk: memberPk(db, scopeTag, p.document_id), sk, text_sha256: p.text_sha256, bytes: p.bytes, txn, prev: prior } });
        intent.members.push([p.document_id, sk]);
      }
      // A visible passage that moves to another document leaves its member there.
      if (visible?.doc && visible.doc !== p.document_id) {
        const sk = memberSk(visible.gen!, p.id);
        intent.moved.push([visible.doc, sk]);
        leaving.set(visible.doc, (leaving.get(visible.doc) ?? new Set()).add(sk));
      }
      if (visible && visible.doc === null) {
        counts.passages -= 1;
        counts.bytes -= visible.bytes;
      }
      if (p.document_id === null) {
        counts.passages += 1;
        counts.bytes += p.bytes;
      }
      writes.push(group);
    }
    const touched = new Set<string>([...decisions].filter(([, d]) => !d.skip).map(([id]) => id));
    for (const doc of leaving.keys()) touched.add(doc);
    intent.documents = [...touched];
    for (const [doc, d] of decisions) if (!d.skip && d.flips && documents.get(doc)) intent.flips.push([doc, d.target]);

    await beginTransaction(engine, database, scopeTag, turn, intent);
    for (const part of chunks(entries, VECTOR_BATCH_MAX)) await engine.vectors.put(database.index, part);
    for (const part of chunks(writes, PER_TRANSACTION)) await engine.kv.transact([turn.check, ...part.flat()]);

    const documentWrites: KvWrite[] = [];
    for (const doc of touched) {
      const before = documents.get(doc);
      const decision = decisions.get(doc);
      const generation = decision && !decision.skip ? decision.target : before!.generation;
      const state = await recount(engine, db, scopeTag, doc, generation, leaving.get(doc) ?? new Set());
      const { prev: _prev, ...beforeVersion } = documentItems.get(doc) ?? { prev: null };
      documentWrites.push({
        put: { pk: documentPk(db, scopeTag), sk: doc, generation, deleted: false, ...state, updated_at: new Date(now).toISOString(), txn, prev: before ? (beforeVersion as unknown as Record<string, never>) : null },
      });
      counts.passages += state.passages - (before && !before.deleted ? before.passages : 0);
      counts.bytes += state.bytes - (before && !before.deleted ? before.bytes : 0);
    }
    for (const part of chunks(documentWrites, 99)) await engine.kv.transact([turn.check, ...part]);

    await commit(engine, database, scopeTag, turn, txn, counts);
    await finish(engine, database, scopeTag, intent);
    return { ingested: stored.length, skipped };
  });
}

/**
 * Deletes a document as one transaction: it disappears at once (its item says `deleted` and
 * remembers its generation), then its passages and entries go. Undefined when it never existed.
 */
export async function deleteDocument(engine: Engine, database: VectorDatabase, scopeTag: string, documentId: string): Promise<{ generation: number; deleted: number } | undefined> {
  const db = database.database_id;
  return underLease(engine, database, scopeTag, async (turn) => {
    const item = (await readDocumentItems(engine, db, scopeTag, [documentId])).get(documentId);
    if (!item) return undefined;
    if (item.deleted) return { generation: item.generation, deleted: 0 };
    const txn = turn.committed + 1;
    const intent: Intent = { txn, adds: [], passages: [], members: [], documents: [documentId], moved: [], flips: [[documentId, null]], drops: [] };
    await beginTransaction(engine, database, scopeTag, turn, intent);
    const { prev: _prev, ...before } = item;
    await engine.kv.transact([
      turn.check,
      {
        put: {
          pk: documentPk(db, scopeTag),
          sk: documentId,
          generation: item.generation,
          deleted: true,
          passages: 0,
          bytes: 0,
          content_sha256: item.content_sha256,
          updated_at: new Date(engine.clock.now()).toISOString(),
          txn,
          prev: before as unknown as Record<string, never>,
        },
      },
    ]);
    await commit(engine, database, scopeTag, turn, txn, { passages: -item.passages, bytes: -item.bytes });
    await finish(engine, database, scopeTag, intent);
    return { generation: item.generation, deleted: item.passages };
  });
}
