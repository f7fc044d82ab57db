/**
 * Processing an item (docs/decisions/knowledge-items.md, "Processing"): the `knowledge` queue's
 * message names one item; a processor claims it under a lease, reads its file, extracts its text
 * (extract/), chunks it (chunks.ts), writes the package (packages.ts), and for `cloud` embeds the
 * chunks through the workspace's vector database and puts them in its index (chunk-index.ts). The
 * item is then `done`, serving the new package, in one conditional write with the collection's
 * counters; or `failed` with its reason. Each item on its own: one failing never fails another.
 *
 * Crash safety: the package id is fixed when the item is queued, so a retry writes the same blob and
 * the same index keys again (a chunk is never indexed twice), and nothing is served before the final
 * write. A processor that dies leaves a lease entry; the processing sweep sends the item again once
 * the lease ends (sweepProcessing). A transient failure (the upstream, a throttle, the store) is
 * tried again later, MAX_ATTEMPTS in all, then the item fails with `upstream_error`.
 */
import type { Engine, KvItem, KvWrite, VectorEntry } from '../engine/ports.js';
import { ConditionFailedError, TransactionCanceledError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { log } from '../shared/log.js';
import { keepRenewing } from '../shared/leases.js';
import { embedTexts } from '../vector/embed.js';
import { readDatabase, stampedRoute } from '../vector/databases.js';
import { chunkSections, type Chunk, type ChunkOptions } from './chunks.js';
import type { Principal } from '../auth/principal.js';
import type { HeldBudget } from '../ai/limits.js';
import { chunkEntry, putEntries, removePackage } from './chunk-index.js';
import { collectionKey, itemKey, PROCESSING_PARTITION, processingKey, sweepDueBefore } from './collection-keys.js';
import { detectFormat, MAX_INPUT_BYTES, type Extracted } from './extract/index.js';
import { extractBounded, type Extraction } from './extraction-pool.js';
import { transcribeRecording } from './extract/media.js';
import { asItem, collectionWrite, leaseSeconds, sendProcessing, servedCounters, type Item, type ItemFailure, type ProcessItemMessage } from './items.js';
import { ADMITTED, releaseSlotWrite } from './collection-records.js';
import { writePackage } from './packages.js';
import { readBytes } from './blob-reads.js';

/** Attempts an item gets at a transient failure before it fails `upstream_error`. */
export const MAX_ATTEMPTS = 3;
/** Chunks a single embeddings call takes. */
const EMBED_BATCH = 64;
/** A recording may be large (transcription streams its audio track); other files are parsed whole in memory. */
const MAX_RECORDING_BYTES = 2 * 1024 * 1024 * 1024;

const nowSeconds = (engine: Engine) => Math.floor(engine.clock.now() / 1000);

export type ProcessOutcome = 'done' | 'failed' | 'retry' | 'busy' | 'gone';

class ItemFailed extends Error {
  constructor(
    readonly reason: ItemFailure,
    message: string,
  ) {
    super(message);
  }
}

const FAILURE_MESSAGES: Record<ItemFailure, string> = {
  unsupported_type: 'No parser reads this file type.',
  parse_error: 'The file could not be read: it is damaged, encrypted or not what its type says.',
  empty_text: 'The file holds no text.',
  too_large: 'The file or its text is over the limits of one item.',
  upstream_error: 'The upstream failed.',
  source_expired: "The item's upload expired before it was processed; add the file again.",
};

/** Processes the item the message names; never throws for the item's own faults. */
export async function processItem(engine: Engine, message: ProcessItemMessage): Promise<ProcessOutcome> {
  const key = itemKey(message.org, message.workspace, message.collection, message.item);
  const record = await engine.kv.get(key);
  if (!record) return 'gone';
  let item = asItem(record);
  if (item.state === 'done' || item.state === 'failed') return 'gone';
  const now = nowSeconds(engine);
  if (item.state === 'processing' && item.lease_until > now) return 'busy';
  const collection = await engine.kv.get(collectionKey(item.org, item.workspace, item.collection));
  if (!collection) return 'gone'; // deleted or expired: its removal takes the item

  // The claim: one processor at a time, by the state and attempt it read.
  const lease = processingKey(now + leaseSeconds(), item.org, item.workspace, item.collection, item.id);
  const claim = { state: 'processing', attempt: item.attempt + 1, lease_until: now + leaseSeconds(), lease_sk: lease.sk };
  const claimWrites: KvWrite[] = [
    { update: key, set: claim, condition: { ifEquals: { state: item.state, attempt: item.attempt, pending_package: item.pending_package } } },
    collectionWrite(item, item.state, 'processing'),
    { put: { ...lease } },
  ];
  if (item.lease_sk) claimWrites.push({ delete: { pk: PROCESSING_PARTITION, sk: item.lease_sk } });
  try {
    await engine.kv.transact(claimWrites);
  } catch (error) {
    if (error instanceof TransactionCanceledError) return 'busy'; // another processor claimed it, or it was deleted
    throw error;
  }
  const takenOver = item.state === 'processing';
  item = asItem({ ...record, ...claim });
  // Runs that died (killed for memory or time: no failure was ever recorded) count as attempts too,
  // so a file that kills every processor fails instead of being sent again forever.
  if (takenOver && item.attempt > MAX_ATTEMPTS) {
    return finish(engine, item, { failed: 'too_large', message: `Processing stopped ${MAX_ATTEMPTS} times before it finished: the file is likely too large to process within one run's memory and time.` }, { chunkIds: null });
  }

  const heartbeat = keepLease(engine, item);
  const written: Written = { chunkIds: null };
  try {
    const made = await makePackage(engine, item, collection, heartbeat.signal, written);
    heartbeat.stop();
    return await finish(engine, item, { done: made }, written);
  } catch (error) {
    heartbeat.stop();
    if (error instanceof ItemFailed) return finish(engine, item, { failed: error.reason, message: error.message }, written);
    if (heartbeat.lost) {
      // Deleted meanwhile, or taken over by another processor.
      await discardUnlessTaken(engine, item, written);
      return 'busy';
    }
    if (item.attempt < MAX_ATTEMPTS) {
      log.warn('item processing failed; tried again later', { item: item.id, attempt: item.attempt, error: String(error) });
      return release(engine, item);
    }
    const message = error instanceof PlatformError ? error.message : 'Processing kept failing.';
    return finish(engine, item, { failed: 'upstream_error', message: `${message} (after ${item.attempt} attempts)` }, written);
  }
}

/** Renews the item's lease while it is processed; `lost` once another processor holds it. */
const keepLease = (engine: Engine, item: Item) =>
  keepRenewing(engine.kv, {
    key: { pk: item.record.pk, sk: item.record.sk },
    set: () => ({ lease_until: nowSeconds(engine) + leaseSeconds() }),
    condition: { ifEquals: { state: 'processing', attempt: item.attempt } },
    everyMs: (leaseSeconds() * 1000) / 3,
    why: 'the item was deleted or taken over',
  });

interface Made {
  chunk_count: number;
  skipped_chunks: number;
}

/** The chunks of the package this attempt wrote (null before it writes one): what it removes if the item is no longer its own. */
interface Written {
  chunkIds: string[] | null;
}

async function makePackage(engine: Engine, item: Item, collection: KvItem, signal: AbortSignal, written: Written): Promise<Made> {
  const head = await engine.blobs.head(item.source_key);
  if (!head) throw new ItemFailed('source_expired', FAILURE_MESSAGES.source_expired);
  const format = detectFormat(new Uint8Array(0), item.content_type, item.filename);
  const recording = format === 'audio' || format === 'video';
  if (head.size > (recording ? MAX_RECORDING_BYTES : MAX_INPUT_BYTES)) throw new ItemFailed('too_large', `The file is ${head.size} bytes; an item reads at most ${recording ? MAX_RECORDING_BYTES : MAX_INPUT_BYTES}.`);
  const bytes = await readBytes(engine, item.source_key);
  if (!bytes) throw new ItemFailed('source_expired', FAILURE_MESSAGES.source_expired);
  const detected = detectFormat(bytes, item.content_type, item.filename);
  // A document is parsed in a bounded child (extraction-pool.ts): a hostile file costs that child only.
  // A recording's work is the upstream's and ffmpeg's (a process of its own); its transcript is chunked here.
  const extracted: Extraction =
    detected === 'audio' || detected === 'video'
      ? withChunks(await transcribeRecording(engine, item.owner, { bytes, contentType: item.content_type, filename: item.filename, format: detected }, signal), item.chunking ?? undefined)
      : await extractBounded({ bytes, contentType: item.content_type, filename: item.filename, ...(item.chunking ? { chunking: item.chunking } : {}) });
  if ('failed' in extracted) throw new ItemFailed(extracted.failed, extracted.message || FAILURE_MESSAGES[extracted.failed]);
  const { chunks } = extracted;
  signal.throwIfAborted();
  written.chunkIds = chunks.map((c) => c.chunk_id);
  await writePackage(
    engine,
    item,
    { package_id: item.pending_package, item_id: item.id, collection_id: item.collection, filename: item.filename, content_type: item.content_type, sha256: item.sha256, created_at: new Date(engine.clock.now()).toISOString() },
    extracted.sections,
    chunks,
  );
  if (item.mode !== 'cloud') return { chunk_count: chunks.length, skipped_chunks: 0 };
  const skipped = await indexChunks(engine, item.owner, { workspace: item.workspace, collection: item.collection, id: item.id, pkg: item.pending_package }, collection, chunks, signal);
  if (skipped === 'no database') throw new ItemFailed('upstream_error', "This collection's vector database was deleted; its items cannot be indexed. Create a new collection.");
  return { chunk_count: chunks.length, skipped_chunks: skipped };
}

/**
 * A `cloud` collection's package indexed: its chunks embedded through the workspace's vector database
 * (as `owner`, inside the gateway's limits) and put in its index under keys of the item and package
 * (a retry puts the same keys). Returns the chunks the index could not take, or `no database` when
 * the collection's database is gone. Also what a knowledge job's publish step indexes with.
 */
export async function indexChunks(
  engine: Engine,
  owner: Principal,
  item: { workspace: string; collection: string; id: string; pkg: string },
  collection: KvItem,
  chunks: Chunk[],
  signal?: AbortSignal,
  heldBudget?: HeldBudget,
): Promise<number | 'no database'> {
  const database = await readDatabase(engine, item.workspace);
  if (!database || database.database_id !== collection.vector_database_id || database.state !== 'active') return 'no database';
  const route = await stampedRoute(engine, database);
  let skipped = 0;
  for (let i = 0; i < chunks.length; i += EMBED_BATCH) {
    signal?.throwIfAborted();
    const batch = chunks.slice(i, i + EMBED_BATCH);
    const vectors = await embedTexts(engine, owner, route, database, batch.map((c) => c.text), signal, heldBudget);
    const entries: VectorEntry[] = [];
    batch.forEach((chunk, j) => {
      const entry = chunkEntry(item.collection, item.id, item.pkg, chunk, vectors[j]);
      if (entry) entries.push(entry);
      else skipped += 1;
    });
    await putEntries(engine, database.index, entries);
  }
  return skipped;
}

const withChunks = (extracted: Extracted, chunking?: ChunkOptions): Extraction => ('failed' in extracted ? extracted : { sections: extracted.sections, chunks: chunkSections(extracted.sections, chunking) });

/**
 * The final write: `done` serving the new package, or `failed` (serving none), with the collection's
 * counters, only if this attempt still holds the item. Then what it no longer serves is removed.
 */
async function finish(engine: Engine, item: Item, outcome: { done: Made } | { failed: ItemFailure; message: string }, written: Written): Promise<ProcessOutcome> {
  const processedAt = new Date(engine.clock.now()).toISOString();
  const served =
    'done' in outcome
      ? { package_id: item.pending_package, chunk_count: outcome.done.chunk_count, skipped_chunks: outcome.done.skipped_chunks, vectors_stored: 0, indexed: item.mode === 'cloud' || outcome.done.chunk_count === 0 }
      : { package_id: null, chunk_count: 0, skipped_chunks: 0, vectors_stored: 0, indexed: false };
  // Its organization's queued-item slot is given back in the same write (collection-records.ts, admission).
  const set =
    'done' in outcome
      ? { state: 'done', ...served, error_code: null, error_message: null, processed_at: processedAt, lease_until: 0, lease_sk: null, [ADMITTED]: false }
      : { state: 'failed', ...served, error_code: outcome.failed, error_message: outcome.message.slice(0, 1000), processed_at: processedAt, lease_until: 0, lease_sk: null, [ADMITTED]: false };
  let current = item;
  for (let attempt = 0; ; attempt++) {
    // The package served until now leaves the counters as they are now (vectors may have arrived for it meanwhile).
    const delta: Record<string, number> = { ...servedCounters(current, -1) };
    for (const [k, v] of Object.entries(servedCounters(served, 1))) delta[k] = (delta[k] ?? 0) + v;
    const writes: KvWrite[] = [
      {
        update: { pk: item.record.pk, sk: item.record.sk },
        set,
        condition: { ifEquals: { state: 'processing', attempt: item.attempt, vectors_stored: current.vectors_stored, indexed: current.indexed } },
      },
      collectionWrite(item, 'processing', 'done' in outcome ? 'done' : 'failed', delta),
      { delete: { pk: PROCESSING_PARTITION, sk: current.lease_sk ?? item.lease_sk! } },
      ...releaseSlotWrite(item),
    ];
    try {
      await engine.kv.transact(writes);
      break;
    } catch (error) {
      if (!(error instanceof TransactionCanceledError)) throw error;
      const now = await engine.kv.get({ pk: item.record.pk, sk: item.record.sk });
      if (now && now.state === 'processing' && Number(now.attempt) === item.attempt && attempt < 5) {
        current = asItem(now); // its old package's vectors changed, or the sweep moved its lease entry: again
        continue;
      }
      // Deleted meanwhile (or its collection), or taken over: what this attempt made is nobody's unless the taker makes the same package.
      if (!now || now.pending_package !== item.pending_package) await removePackage(engine, item, item.pending_package, written.chunkIds ?? undefined);
      return 'gone';
    }
  }
  const old = item.package_id;
  if (old !== null && old !== item.pending_package) await removePackage(engine, item, old).catch((error) => log.warn('old package not removed', { item: item.id, error: String(error) }));
  if ('failed' in outcome) await removePackage(engine, item, item.pending_package, written.chunkIds ?? undefined).catch(() => undefined);
  return 'done' in outcome ? 'done' : 'failed';
}

/**
 * What an attempt that lost the item wrote, removed unless another attempt makes the same package:
 * the delete that took the item may have run before the package was written or its vectors put, so
 * it could not remove them.
 */
async function discardUnlessTaken(engine: Engine, item: Item, written: Written): Promise<void> {
  const now = await engine.kv.get({ pk: item.record.pk, sk: item.record.sk });
  if (!now || now.pending_package !== item.pending_package) await removePackage(engine, item, item.pending_package, written.chunkIds ?? undefined);
}

/** After a transient failure: queued again, and sent again after a pause that grows with the attempts. */
async function release(engine: Engine, item: Item): Promise<ProcessOutcome> {
  const delay = Math.min(300, 5 * 2 ** item.attempt);
  const lease = processingKey(nowSeconds(engine) + delay + leaseSeconds(), item.org, item.workspace, item.collection, item.id);
  try {
    await engine.kv.transact([
      { update: { pk: item.record.pk, sk: item.record.sk }, set: { state: 'queued', lease_until: 0, lease_sk: lease.sk }, condition: { ifEquals: { state: 'processing', attempt: item.attempt } } },
      collectionWrite(item, 'processing', 'queued'),
      { delete: { pk: PROCESSING_PARTITION, sk: item.lease_sk! } },
      { put: { ...lease } },
    ]);
  } catch (error) {
    if (error instanceof TransactionCanceledError) return 'gone';
    throw error;
  }
  await sendProcessing(engine, item, delay).catch(() => undefined);
  return 'retry';
}

/**
 * The processing sweep: items whose lease entry is due were lost (a send that failed, a processor
 * that died). Each is sent again with a fresh entry; an entry whose item moved on is dropped, and
 * one whose item's lease was renewed moves to the new end. Returns the entries looked at.
 */
export async function sweepProcessing(engine: Engine, limit = 100): Promise<number> {
  const now = nowSeconds(engine);
  const page = await engine.kv.query({ pk: PROCESSING_PARTITION, sk: sweepDueBefore(now + 1), limit });
  for (const entry of page.items) {
    await sweepEntry(engine, entry, now).catch((error) => log.warn('processing sweep entry failed; retried next sweep', { sk: String(entry.sk), error: String(error) }));
  }
  return page.items.length;
}

async function sweepEntry(engine: Engine, entry: KvItem, now: number): Promise<void> {
  const [, org, workspace, collection, id] = String(entry.sk).split('#');
  const record = await engine.kv.get(itemKey(org, workspace, collection, id));
  if (!record || record.lease_sk !== entry.sk) return void (await engine.kv.delete({ pk: entry.pk, sk: entry.sk }));
  const item = asItem(record);
  const due = item.state === 'processing' && item.lease_until > now ? item.lease_until : now + leaseSeconds();
  const next = processingKey(due, org, workspace, collection, id);
  try {
    await engine.kv.transact([
      { update: { pk: record.pk, sk: record.sk }, set: { lease_sk: next.sk }, condition: { ifEquals: { lease_sk: entry.sk } } },
      { delete: { pk: entry.pk, sk: entry.sk } },
      { put: { ...next } },
    ]);
  } catch (error) {
    if (error instanceof TransactionCanceledError) return; // it moved meanwhile
    throw error;
  }
  if (due !== item.lease_until) await sendProcessing(engine, item);
}
