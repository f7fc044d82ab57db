/**
 * A randomized model-based test of collection items (docs/ai/collections.md, docs/decisions/knowledge-items.md)
 * on the embedded engine, without queue workers: the services the routes call, and the processing
 * consumer called directly (processItem) for a chosen item, so every run is deterministic. fast-check
 * generates sequences of: adding a text item (valid, or binary: it fails `unsupported_type`), deleting,
 * re-processing and processing an item (one added, or one deleted), querying a cloud collection (the
 * fake embedder over HTTP), and two operations on one item at once (delete while processing,
 * re-process twice, process twice, delete while re-processing). A plain in-memory model says what
 * each must answer, and after every step:
 *
 * - the collection's counts, status and `indexing` are the model's;
 * - the items listed, with their statuses, served package (or none), chunk counts and errors, are the model's;
 * - a query of an item's text answers exactly the items that serve a package (the corpus is small
 *   enough that all fit top_k 20), each with its own text from its current package, and `indexing`
 *   is the model's;
 * - the index holds exactly one entry per chunk of each served package: none of a deleted item,
 *   a replaced package or a failed item;
 * - a deleted item is 404 item_not_found;
 * - the organization's queued-item slots (admission, docs/decisions/knowledge-fairness.md) are exactly
 *   its items queued or processing, and deleting the collection at the end of a run gives back all of its.
 *
 * Replay a failure with FC_SEED=<seed> FC_PATH=<path> from fast-check's report.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { KvUpdate } from '../../lambdas/engine/ports.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { createVectorDatabase, type VectorDatabase } from '../../lambdas/vector/databases.js';
import { createCollection, deleteCollection, getCollection, parseCreateCollection, statusOf } from '../../lambdas/knowledge/collections.js';
import { addItem, deleteItem, fileToAdd, getItem, listItems, parseAddItem, reprocessItem } from '../../lambdas/knowledge/items.js';
import { processItem } from '../../lambdas/knowledge/processing.js';
import { indexingOf, parseCollectionQuery, queryCollection } from '../../lambdas/knowledge/collection-query.js';
import { collectionScope } from '../../lambdas/knowledge/chunk-index.js';
import { collectionKey, itemKey, queuedItemsKey } from '../../lambdas/knowledge/collection-keys.js';
import { PlatformError } from '../../lambdas/shared/errors.js';
import { startFakeEmbedder, fakeVector, type FakeEmbedder } from '../helpers/fake-embedder.js';

const RUNS = 300;
const MAX_STEPS = 25;
/** No run starts after this long (a run past it passes at once), so the file stays near a minute. */
const TIME_LIMIT_MS = 45_000;

/** Each text is its own nearest chunk (the fake embedder: shared words are close). */
const TEXTS = ['Puffins nest on the northern cliffs.', 'The ferry leaves at noon.', 'Basalt columns line the shore.', 'Lighthouse keepers trim the lamp.', 'Seals rest on the eastern beach.'];
const BINARY = '\u0000\u0001\u0002 binary';

let dir: string;
let engine: EmbeddedEngine;
let embedder: FakeEmbedder;
let principal: Principal;
let workspace: string;
let database: VectorDatabase;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'collection-model-'));
  engine = createEmbeddedEngine({ dataDir: dir });
  embedder = await startFakeEmbedder();
  const tenants = new Tenants(engine.kv, () => engine.clock.now());
  const org = (await tenants.createOrganization('model')).id;
  workspace = (await tenants.createWorkspace(org, 'default')).id;
  await new ModelRoutes(engine.kv, () => engine.clock.now()).set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 5_000, default: true });
  database = await createVectorDatabase(engine, workspace, 'emb');
  principal = { kind: 'secret_key', credentialId: 'key_model', organizationId: org, applicationId: null, workspaceId: null, capabilities: null, userId: null, claims: null, origins: null, permissions: null };
});

afterAll(async () => {
  await embedder?.close();
  await engine?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

type State = 'queued' | 'done' | 'failed';

interface ModelItem {
  id: string;
  text: string;
  valid: boolean;
  state: State;
  /** The text of the package it serves, or null (none yet, or failed). */
  served: string | null;
}

class Model {
  items: ModelItem[] = [];
  deleted: string[] = [];

  live(): ModelItem[] {
    return this.items.filter((i) => !this.deleted.includes(i.id));
  }

  counts() {
    const live = this.live();
    const n = (s: State) => live.filter((i) => i.state === s).length;
    return { total: live.length, queued: n('queued'), processing: 0, done: n('done'), failed: n('failed') };
  }

  indexing() {
    const c = this.counts();
    return { indexed: c.done, total: c.total, complete: c.done === c.total, searchable: this.live().some((i) => i.served !== null), skipped_items: c.failed, skipped_chunks: 0 };
  }

  /** The item's state once processed (a queued item only). */
  process(item: ModelItem) {
    item.state = item.valid ? 'done' : 'failed';
    item.served = item.valid ? item.text : null;
  }
}

// ---------------------------------------------------------------------------------------------
// The operations fast-check draws
// ---------------------------------------------------------------------------------------------

type Op =
  | { kind: 'add'; text: number; valid: boolean }
  | { kind: 'delete' | 'reprocess' | 'process'; item: number }
  | { kind: 'query'; text: number }
  | { kind: 'together'; pair: 'delete+process' | 'delete-while-processing' | 'reprocess+reprocess' | 'process+process' | 'delete+reprocess'; item: number };

/** `item` picks among every item added in the run (deleted ones too), modulo their count; mostly the newest (likelier queued). */
const itemRef = fc.oneof(fc.constant(-1), fc.nat(20));
const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('add' as const), text: fc.nat(TEXTS.length - 1), valid: fc.oneof({ arbitrary: fc.constant(true), weight: 4 }, { arbitrary: fc.constant(false), weight: 1 }) }), weight: 5 },
  { arbitrary: fc.record({ kind: fc.constant('process' as const), item: itemRef }), weight: 7 },
  { arbitrary: fc.record({ kind: fc.constantFrom('delete' as const, 'reprocess' as const), item: itemRef }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('query' as const), text: fc.nat(TEXTS.length - 1) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('together' as const), pair: fc.constantFrom('delete+process' as const, 'delete-while-processing' as const, 'reprocess+reprocess' as const, 'process+process' as const, 'delete+reprocess' as const), item: itemRef }), weight: 2 },
);

// ---------------------------------------------------------------------------------------------
// The real system: the services, one cloud collection per run
// ---------------------------------------------------------------------------------------------

/** An operation's kept answer: these tests claim no operation id, so it is written aside. */
const keep = (answer: object): KvUpdate => ({ update: { pk: 'model-kept', sk: randomUUID() }, set: { answer: JSON.stringify(answer) } });

/** The error code a call threw, or 'ok'. */
async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
    return 'ok';
  } catch (error) {
    if (error instanceof PlatformError) return error.code;
    throw error;
  }
}

/** The organization's queued-item slots taken. */
const slotsHeld = async () => Number((await engine.kv.get(queuedItemsKey(principal.organizationId)))?.n ?? 0);

class Real {
  collection!: string;
  /** Slots held when the run began (by a run that failed before it deleted its collection). */
  slotsBefore = 0;
  constructor(readonly model: Model) {}

  async setup() {
    this.collection = (await createCollection(engine, principal, parseCreateCollection({ mode: 'cloud' }), keep)).id;
    this.slotsBefore = await slotsHeld();
  }

  /** The collection goes with every slot its items held. */
  async teardown() {
    await deleteCollection(engine, principal, this.collection);
    expect(await slotsHeld()).toBe(this.slotsBefore);
  }

  message(id: string) {
    return { org: principal.organizationId, workspace, collection: this.collection, item: id };
  }

  async add(text: number, valid: boolean) {
    const body = valid ? { text: TEXTS[text], filename: `t${text}.txt` } : { text: BINARY, filename: 'blob.bin', content_type: 'application/octet-stream' };
    const view = await addItem(engine, principal, this.collection, await fileToAdd(engine, principal, parseAddItem(body)), keep);
    expect(view).toMatchObject({ status: 'queued', package_id: null, error: null });
    this.model.items.push({ id: view.item_id, text: valid ? TEXTS[text] : BINARY, valid, state: 'queued', served: null });
  }

  /** One operation on `item`, checked against the model, which it then moves. */
  async single(kind: 'delete' | 'reprocess' | 'process', item: ModelItem) {
    const gone = this.model.deleted.includes(item.id);
    if (kind === 'process') {
      const outcome = await processItem(engine, this.message(item.id));
      if (gone || item.state !== 'queued') expect(outcome).toBe('gone');
      else {
        expect(outcome).toBe(item.valid ? 'done' : 'failed');
        this.model.process(item);
      }
    } else if (kind === 'delete') {
      expect(await codeOf(deleteItem(engine, principal, this.collection, item.id))).toBe(gone ? 'item_not_found' : 'ok');
      if (!gone) this.model.deleted.push(item.id);
    } else {
      const code = await codeOf(reprocessItem(engine, principal, this.collection, item.id));
      expect(code).toBe(gone ? 'item_not_found' : item.state === 'queued' ? 'item_not_ready' : 'ok');
      if (code === 'ok') item.state = 'queued';
    }
  }

  /** Two operations on `item` at once: each answers as in one of the two orders, and the end state is the model's. */
  async together(pair: Extract<Op, { kind: 'together' }>['pair'], item: ModelItem, note: (what: string) => void) {
    const gone = this.model.deleted.includes(item.id);
    const process = () => processItem(engine, this.message(item.id));
    const del = () => codeOf(deleteItem(engine, principal, this.collection, item.id));
    const reprocess = () => codeOf(reprocessItem(engine, principal, this.collection, item.id));
    if (pair === 'delete+process') {
      const [deleted, outcome] = await Promise.all([del(), process()]);
      note(`delete+process of a ${gone ? 'deleted' : item.state} item: ${outcome}`);
      expect(deleted).toBe(gone ? 'item_not_found' : 'ok');
      // Processed before the delete, or found deleted (before its claim, or at its final write).
      expect(['gone', 'busy', ...(item.state === 'queued' && !gone ? [item.valid ? 'done' : 'failed'] : [])]).toContain(outcome);
      if (!gone) this.model.deleted.push(item.id);
    } else if (pair === 'delete-while-processing') {
      // The delete once the processor has claimed the item (or finished): its final write finds the item gone.
      const processing = process();
      let settled = false;
      void processing.finally(() => (settled = true)).catch(() => undefined);
      const key = itemKey(principal.organizationId, workspace, this.collection, item.id);
      while (!settled && (await engine.kv.get(key))?.state !== 'processing') await new Promise((resolve) => setImmediate(resolve));
      const claimed = !settled;
      const deleted = await del();
      const outcome = await processing;
      note(`delete-while-processing of a ${gone ? 'deleted' : item.state} item${claimed ? ', claimed' : ''}: ${outcome}`);
      expect(deleted).toBe(gone ? 'item_not_found' : 'ok');
      expect(['gone', ...(item.state === 'queued' && !gone ? [item.valid ? 'done' : 'failed'] : [])]).toContain(outcome);
      if (claimed) expect(outcome).toBe('gone');
      if (!gone) this.model.deleted.push(item.id);
    } else if (pair === 'delete+reprocess') {
      const [deleted, reprocessed] = await Promise.all([del(), reprocess()]);
      expect(deleted).toBe(gone ? 'item_not_found' : 'ok');
      expect(gone ? ['item_not_found'] : item.state === 'queued' ? ['item_not_ready', 'item_not_found'] : ['ok', 'item_not_found']).toContain(reprocessed);
      if (!gone) this.model.deleted.push(item.id);
    } else if (pair === 'reprocess+reprocess') {
      const codes = (await Promise.all([reprocess(), reprocess()])).sort();
      expect(codes).toEqual(gone ? ['item_not_found', 'item_not_found'] : item.state === 'queued' ? ['item_not_ready', 'item_not_ready'] : ['item_not_ready', 'ok']);
      if (!gone) item.state = 'queued';
    } else {
      const outcomes = (await Promise.all([process(), process()])).sort();
      note(`process+process of a ${gone ? 'deleted' : item.state} item: ${outcomes.join(' ')}`);
      if (gone || item.state !== 'queued') expect(outcomes).toEqual(['gone', 'gone']);
      else {
        // One claims and finishes; the other finds it claimed (busy) or already final (gone).
        const done = item.valid ? 'done' : 'failed';
        expect([[done, 'gone'].sort(), [done, 'busy'].sort()]).toContainEqual(outcomes);
        this.model.process(item);
      }
    }
  }

  async query(text: number) {
    const answer = await queryCollection(engine, principal, this.collection, parseCollectionQuery({ query: TEXTS[text], top_k: 20 }));
    const serving = this.model.live().filter((i) => i.served !== null);
    expect(answer.matches.map((m) => m.citation.item_id).sort()).toEqual(serving.map((i) => i.id).sort());
    for (const m of answer.matches) {
      const item = serving.find((i) => i.id === m.citation.item_id)!;
      expect(m.text).toBe(item.served);
      expect(m.citation).toMatchObject({ collection_id: this.collection, chunk_id: 'chk_000000', locator: expect.any(String) });
    }
    // The item whose text was asked for comes first (cosine 1).
    const own = serving.filter((i) => i.served === TEXTS[text]).map((i) => i.id);
    if (own.length) expect(own).toContain(answer.matches[0].citation.item_id);
    expect(answer.indexing).toEqual(this.model.indexing());
  }

  /** Everything a reader sees now, against the model. */
  async check() {
    const counts = this.model.counts();
    const collection = await getCollection(engine, principal, this.collection);
    expect({ status: collection.status, counts: collection.counts }).toEqual({ status: statusOf(counts), counts });
    // What a query would report as `indexing` now, without its embeddings call.
    expect(indexingOf((await engine.kv.get(collectionKey(principal.organizationId, workspace, this.collection)))!)).toEqual(this.model.indexing());
    const listed = await listItems(engine, principal, this.collection, { limit: '100' });
    const live = this.model.live();
    const byId = new Map(listed.data.map((v) => [v.item_id, v]));
    expect([...byId.keys()].sort()).toEqual(live.map((i) => i.id).sort());
    for (const item of live) {
      const view = byId.get(item.id)!;
      expect({ status: view.status, served: view.package_id !== null, chunk_count: view.chunk_count, error: view.error?.code ?? null }).toEqual({
        status: item.state,
        served: item.served !== null,
        chunk_count: item.served !== null ? 1 : null,
        error: item.state === 'failed' ? 'unsupported_type' : null,
      });
    }
    for (const id of this.model.deleted) expect(await codeOf(getItem(engine, principal, this.collection, id))).toBe('item_not_found');
    // The index: one entry per served package's chunk, nothing else of this collection.
    const hits = await engine.vectors.query(database.index, { vector: Float32Array.from(fakeVector('anything')), topK: 100, filter: { scope: collectionScope(this.collection) } });
    const entries = hits.map((h) => h.key.split('.').slice(0, 2).join('.')).sort();
    expect(entries).toEqual(live.filter((i) => i.served !== null).map((i) => `${i.id}.${byId.get(i.id)!.package_id}`).sort());
    expect(await slotsHeld()).toBe(this.slotsBefore + counts.queued + counts.processing);
  }
}

it('items added, processed, deleted, re-processed and queried, alone and two at once, behave like the model', { timeout: 120_000 }, async () => {
  const env = process.env;
  const seed = env.FC_SEED ? Number(env.FC_SEED) : (Date.now() ^ (Math.random() * 0x100000000)) | 0;
  const deadline = Date.now() + TIME_LIMIT_MS;
  const tally = new Map<string, number>();
  let runs = 0;
  const note = (what: string) => tally.set(what, (tally.get(what) ?? 0) + 1);
  const property = fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: MAX_STEPS }), async (ops) => {
    if (Date.now() > deadline) return;
    runs++;
    const model = new Model();
    const real = new Real(model);
    await real.setup();
    await real.check();
    for (const o of ops) {
      note(o.kind === 'together' ? o.pair : o.kind);
      if (o.kind === 'add') await real.add(o.text, o.valid);
      else if (o.kind === 'query') await real.query(o.text);
      else {
        if (!model.items.length) continue;
        const item = model.items[o.item < 0 ? model.items.length - 1 : o.item % model.items.length];
        if (o.kind === 'together') await real.together(o.pair, item, note);
        else await real.single(o.kind, item);
      }
      await real.check();
    }
    for (const item of model.live()) note(`final ${item.state}`);
    await real.teardown();
  });
  await fc.assert(property, { numRuns: env.FC_RUNS ? Number(env.FC_RUNS) : RUNS, seed, path: env.FC_PATH, endOnFailure: env.FC_SHRINK === '0' });
  console.log(`collection items model: seed ${seed}, ${runs} runs; ${[...tally].sort().map(([k, v]) => `${k} ${v}`).join(', ')}`);
});
