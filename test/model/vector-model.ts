/**
 * A randomized model-based test of the vector database (docs/ai/vector.md, docs/decisions/vector-database.md),
 * shared by its runs on each engine (vector.model.test.ts: embedded; vector.model.aws.test.ts: the AWS
 * adapters). fast-check generates sequences of ingests (small batches over a few passage ids and
 * documents, with and without generations, stale and deleted ones, duplicate ids in a call, passages to
 * skip), document deletions, queries (shared, local and hybrid, by two keys, with and without filters)
 * and document listings (paged). Each runs against the domain (the services the routes call, with the
 * fake embeddings upstream over HTTP) and against a plain in-memory model of the rules; answers must be
 * equal: ingested and skipped (index, id, reason; an invalid_metadata one's message and param), the matching passages of a query (the corpus is small
 * enough that every match fits top_k 50) with their scores, texts, metadata and scopes, listings
 * (generation, passages, content_sha256), and the database's counters. Two ingests at once must answer
 * and leave what one of their two orders would. A crash command kills a write at its n-th write to the
 * store or the index (every later one fails, as in a dead process): readers then see the scope as before
 * the write or as after it, whole, and once the lease lapses the next writer rolls it back or finishes it.
 * Replay a failure with FC_SEED=<seed> FC_PATH=<path> from fast-check's report.
 */
import { expect, it } from 'vitest';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { startFakeEmbedder, fakeVector, type FakeEmbedder } from '../helpers/fake-embedder.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { ModelRoutes, type ModelRoute } from '../../lambdas/ai/model-routes.js';
import { createVectorDatabase, readDatabase, stampedRoute, type VectorDatabase } from '../../lambdas/vector/databases.js';
import { ingestPassages } from '../../lambdas/vector/ingest.js';
import { parseIngestRequest } from '../../lambdas/vector/passages.js';
import { parseQueryRequest } from '../../lambdas/vector/query.js';
import { answerQuery } from '../../lambdas/vector/answer.js';
import { documentsPage, removeDocument } from '../../lambdas/vector/handling.js';
import { PlatformError } from '../../lambdas/shared/errors.js';
import type { ManualClock } from '../../lambdas/engine/clock.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { canon } from './records-model.js';

/**
 * What the model runs against: an engine whose clock is `clock` (a crash's lease lapses when the test
 * moves it), the fake embeddings upstream, and an organization whose route `emb` calls it.
 */
export interface VectorWorld {
  engine: Engine;
  clock: ManualClock;
  embedder: FakeEmbedder;
  org: string;
  /** What the runs exercised, for the log line: skip reasons, ingested passages, non-empty answers. */
  tally: Map<string, number>;
  /** Stops the embeddings upstream (the engine is the caller's). */
  close(): Promise<void>;
}

const tenants = (engine: Engine) => new Tenants(engine.kv, () => engine.clock.now());

/** The fake embeddings upstream, an organization and its embeddings route, on `engine`. */
export async function startVectorWorld(engine: Engine, clock: ManualClock): Promise<VectorWorld> {
  const embedder = await startFakeEmbedder();
  const org = (await tenants(engine).createOrganization('model')).id;
  await new ModelRoutes(engine.kv, () => engine.clock.now()).set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 5_000 });
  return { engine, clock, embedder, org, tally: new Map(), close: () => embedder.close() };
}

// ---------------------------------------------------------------------------------------------
// The space commands draw from: few ids and documents, so replacements, moves and generations meet.
// ---------------------------------------------------------------------------------------------

const KEYS = ['a', 'b'] as const;
type KeyName = (typeof KEYS)[number];
type ScopeName = 'shared' | 'local';
const IDS = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5'];
const DOCS = ['d0', 'd1', 'd2'];
/**
 * Rarer ids whose order differs by UTF-16 code units (JavaScript's `<`) and by UTF-8 bytes (DynamoDB's
 * sort keys, the spec's listing and content_sha256 order): U+FFFF is above a surrogate pair's first
 * unit but below its four UTF-8 bytes.
 */
const ORDER_IDS = ['p\uffff', 'p\u{1f600}'];
const ORDER_DOCS = ['d\uffff', 'd\u{1f600}'];
const passageId = fc.oneof({ arbitrary: fc.constantFrom(...IDS), weight: 6 }, { arbitrary: fc.constantFrom(...ORDER_IDS), weight: 1 });
const documentId = fc.oneof({ arbitrary: fc.constantFrom(...DOCS), weight: 4 }, { arbitrary: fc.constantFrom(...ORDER_DOCS), weight: 1 });
const TEXTS = ['cats purr softly', 'dogs bark loudly', 'cats and dogs', 'rust borrow checker', 'sql joins and indexes', 'purr purr', 'softly cats purr', 'bark'];
const QUERIES = [...TEXTS, 'cats', 'loud rust', 'indexes'];
type Meta = Record<string, unknown>;
const FILTERS: (Record<string, unknown> | undefined)[] = [
  undefined,
  { kind: 'a' },
  { tag: 'x' },
  { tag: { $in: ['y', 'z'] } },
  { created_at: { $in: [1, 2] } },
  { kind: 'b', tag: 'y' },
  { language: 'en' },
  { created_at: true },
];

/**
 * Passages within the spec's 10 KiB (id + text + metadata, as UTF-8) that JSON makes larger: it writes
 * `"` and `\` in two bytes and a control character in six (`\u0001`), and S3 Vectors measures its
 * metadata as JSON once more. With the index entry's payload as JSON, the first was refused by the
 * S3 Vectors adapter only (41 KB of metadata, over its 40 KiB) and the second failed the whole ingest
 * on both engines (a 36 KB payload, over the port's 32 KiB). Any passage of at most 10 KiB is stored.
 */
export const ESCAPED_TEXTS = {
  quotes: '"'.repeat(10_236),
  controls: '\u0001'.repeat(6_000),
};

/** A passage as sent: fields left out are absent from the JSON. */
export interface SentPassage {
  id?: unknown;
  text?: unknown;
  metadata?: unknown;
  document_id?: string;
  generation?: number;
}

const metadata: fc.Arbitrary<Meta | undefined> = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 3 },
  {
    arbitrary: fc.record(
      {
        kind: fc.constantFrom('a', 'b'),
        tag: fc.oneof(fc.constantFrom('x', 'y'), fc.subarray(['x', 'y', 'z'])),
        created_at: fc.constantFrom(1, 2, 3, true),
        language: fc.constant('en'),
        note: fc.constantFrom('free text', ''),
      },
      { requiredKeys: [] },
    ),
    weight: 6,
  },
  // Not flat, or an array of numbers: invalid_metadata.
  { arbitrary: fc.constantFrom<Meta>({ nested: { a: 1 } }, { tag: [1, 2] }, { kind: null }), weight: 1 },
);

const passage: fc.Arbitrary<SentPassage> = fc
  .record({
    id: fc.oneof({ arbitrary: passageId, weight: 20 }, { arbitrary: fc.constantFrom<unknown>('', 7, undefined, 'é'.repeat(129)), weight: 1 }),
    text: fc.oneof(
      { arbitrary: fc.constantFrom(...TEXTS), weight: 20 },
      { arbitrary: fc.constantFrom<unknown>('', '   ', 5, undefined, 'x'.repeat(10 * 1024)), weight: 1 },
      // Up to the 10 KiB with an id and no metadata, over it with metadata.
      { arbitrary: fc.constantFrom(ESCAPED_TEXTS.quotes, ESCAPED_TEXTS.controls), weight: 1 },
    ),
    metadata,
    document: fc.oneof({ arbitrary: fc.constant(undefined), weight: 2 }, { arbitrary: documentId, weight: 3 }),
    generation: fc.oneof({ arbitrary: fc.constant(undefined), weight: 2 }, { arbitrary: fc.integer({ min: 1, max: 5 }), weight: 3 }),
  })
  .map(({ id, text, metadata, document, generation }) => {
    const p: SentPassage = {};
    if (id !== undefined) p.id = id;
    if (text !== undefined) p.text = text;
    if (metadata !== undefined) p.metadata = metadata;
    if (document !== undefined) {
      p.document_id = document;
      if (generation !== undefined) p.generation = generation;
    }
    return p;
  });

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

interface StoredPassage {
  text: string;
  metadata: Meta;
  doc: string | null;
  gen: number | null;
  bytes: number;
}
interface DocumentState {
  generation: number;
  deleted: boolean;
}
interface ScopeState {
  passages: Map<string, StoredPassage>;
  documents: Map<string, DocumentState>;
}
type Skip = { index: number; id: string | null; reason: string; message?: string; param?: string };

const utf8 = (s: string) => Buffer.byteLength(s, 'utf8');
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const flatValue = (v: unknown) => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v)) || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
const isFlat = (m: unknown): m is Meta => typeof m === 'object' && m !== null && !Array.isArray(m) && Object.values(m).every(flatValue);
/** The key an invalid_metadata skip names (the first whose value is not flat) and its message (docs/ai/vector.md). */
function metadataFault(m: object): { key: string; message: string } {
  const [key, v] = Object.entries(m).find(([, value]) => !flatValue(value))!;
  const q = JSON.stringify(key);
  if (typeof v === 'number') return { key, message: `metadata ${q} is not a finite number.` };
  if (Array.isArray(v)) return { key, message: `metadata ${q} is an array of something other than Unicode strings; an array holds strings only.` };
  return { key, message: `metadata ${q} is ${v === null ? 'null' : typeof v === 'object' ? 'an object' : typeof v}; metadata is flat: a string, a finite number, a boolean or an array of strings.` };
}

function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / Math.sqrt(na * nb);
}

/** The filter as docs/ai/vector.md defines it: every key holds; a value equals, `$in` any of; an array value matches when any element does. */
function filterMatches(meta: Meta, filter: Record<string, unknown> | undefined): boolean {
  for (const [key, cond] of Object.entries(filter ?? {})) {
    const value = meta[key];
    if (value === undefined) return false;
    const wanted = typeof cond === 'object' && cond !== null ? (cond as { $in: unknown[] }).$in : [cond];
    if (!(Array.isArray(value) ? value.some((v) => wanted.includes(v)) : wanted.includes(value))) return false;
  }
  return true;
}

class Model {
  scopes = new Map<string, ScopeState>();

  scope(tag: string): ScopeState {
    let s = this.scopes.get(tag);
    if (!s) this.scopes.set(tag, (s = { passages: new Map(), documents: new Map() }));
    return s;
  }

  ingest(tag: string, sent: SentPassage[]): { ingested: number; skipped: Skip[] } {
    const s = this.scope(tag);
    const skipped: Skip[] = [];
    const valid: { index: number; id: string; text: string; metadata: Meta; doc: string | null; generation: number | null; bytes: number }[] = [];
    sent.forEach((p, index) => {
      const id = typeof p.id === 'string' ? p.id : null;
      const skip = (reason: string) => skipped.push({ index, id, reason });
      if (id === null || utf8(id) < 1 || utf8(id) > 256) return skip('invalid_id');
      if (typeof p.text !== 'string' || p.text.trim() === '') return skip('invalid_text');
      const metadata = p.metadata === undefined ? {} : p.metadata;
      if (!isFlat(metadata)) {
        const { key, message } = metadataFault(metadata as object);
        return void skipped.push({ index, id, reason: 'invalid_metadata', message, param: `documents.${index}.metadata.${key}` });
      }
      // Metadata without keys costs nothing (docs/ai/vector.md).
      const bytes = utf8(id) + utf8(p.text) + (Object.keys(metadata).length ? utf8(JSON.stringify(metadata)) : 0);
      if (bytes > 10 * 1024) return skip('passage_too_large');
      valid.push({ index, id, text: p.text, metadata, doc: p.document_id ?? null, generation: p.generation ?? null, bytes });
    });
    // Of two passages with one id in a call, the earlier is skipped.
    const last = new Map(valid.map((p) => [p.id, p.index]));
    const kept = valid.filter((p) => last.get(p.id) === p.index || (skipped.push({ index: p.index, id: p.id, reason: 'duplicate_in_call' }), false));
    // Generations: the document moves to the highest generation its passages ask for (no generation:
    // its current one, 1 for a new document); lower than the current is stale, at or below a deleted
    // one's is document_deleted; of the call's passages, those below the highest are stale.
    const requested = (p: (typeof kept)[number]) => p.generation ?? s.documents.get(p.doc!)?.generation ?? 1;
    const target = new Map<string, number>();
    for (const p of kept) if (p.doc !== null) target.set(p.doc, Math.max(target.get(p.doc) ?? 0, requested(p)));
    const refused = new Map<string, string>();
    for (const [doc, t] of target) {
      const current = s.documents.get(doc);
      if (current?.deleted && t <= current.generation) refused.set(doc, 'document_deleted');
      else if (current && !current.deleted && t < current.generation) refused.set(doc, 'stale_generation');
    }
    const stored = kept.filter((p) => {
      if (p.doc === null) return true;
      const reason = refused.get(p.doc) ?? (requested(p) < target.get(p.doc)! ? 'stale_generation' : undefined);
      if (reason) skipped.push({ index: p.index, id: p.id, reason });
      return !reason;
    });
    for (const [doc, t] of target) {
      if (refused.has(doc)) continue;
      const current = s.documents.get(doc);
      if (!current || current.deleted || t > current.generation) {
        // A higher generation replaces the whole document.
        for (const [id, p] of s.passages) if (p.doc === doc) s.passages.delete(id);
      }
      s.documents.set(doc, { generation: t, deleted: false });
    }
    // Same id, same scope: replaced (and moved to its new document, or out of one).
    for (const p of stored) s.passages.set(p.id, { text: p.text, metadata: p.metadata, doc: p.doc, gen: p.doc === null ? null : target.get(p.doc)!, bytes: p.bytes });
    return { ingested: stored.length, skipped: skipped.sort((a, b) => a.index - b.index) };
  }

  deleteDocument(tag: string, doc: string): { document_id: string; generation: number; deleted: number } | 'document_not_found' {
    const s = this.scope(tag);
    const state = s.documents.get(doc);
    if (!state) return 'document_not_found';
    if (state.deleted) return { document_id: doc, generation: state.generation, deleted: 0 };
    const members = this.members(s, doc);
    for (const [id] of members) s.passages.delete(id);
    state.deleted = true;
    return { document_id: doc, generation: state.generation, deleted: members.length };
  }

  private members(s: ScopeState, doc: string): [string, StoredPassage][] {
    const state = s.documents.get(doc)!;
    return [...s.passages].filter(([, p]) => p.doc === doc && p.gen === state.generation);
  }

  visible(tag: string): [string, StoredPassage][] {
    const s = this.scope(tag);
    return [...s.passages].filter(([, p]) => p.doc === null || (!s.documents.get(p.doc)!.deleted && s.documents.get(p.doc)!.generation === p.gen));
  }

  documents(tag: string) {
    const s = this.scope(tag);
    return [...s.documents]
      .filter(([, d]) => !d.deleted)
      .sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
      .map(([document_id, d]) => {
        const members = this.members(s, document_id).sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
        return { document_id, generation: d.generation, passages: members.length, content_sha256: sha256(members.map(([id, p]) => `${sha256(id)}\n${sha256(p.text)}\n`).join('')) };
      });
  }

  counters() {
    const all = [...this.scopes.keys()].flatMap((tag) => this.visible(tag));
    return { passages: all.length, bytes: all.reduce((n, [, p]) => n + p.bytes, 0) };
  }

  clone(): Model {
    const copy = new Model();
    for (const [tag, st] of this.scopes) {
      copy.scopes.set(tag, {
        passages: new Map([...st.passages].map(([id, p]) => [id, { ...p }])),
        documents: new Map([...st.documents].map(([id, d]) => [id, { ...d }])),
      });
    }
    return copy;
  }

  /** What a reader sees of every scope: visible passages, listings, counters (as Real.snapshot reads them). */
  snapshot(tags: string[]) {
    return {
      scopes: tags.map((tag) => ({
        passages: this.visible(tag).map(([id, p]) => ({ id, text: p.text, metadata: p.metadata })).sort((a, b) => (a.id < b.id ? -1 : 1)),
        documents: this.documents(tag),
      })),
      counters: this.counters(),
    };
  }
}

// ---------------------------------------------------------------------------------------------
// The real system: one workspace database per run, two organization-wide keys
// ---------------------------------------------------------------------------------------------

export class Real {
  database!: VectorDatabase;
  route!: ModelRoute;
  principals = {} as Record<KeyName, Principal>;
  steps = 0;

  constructor(readonly world: VectorWorld) {}

  get engine(): Engine {
    return this.world.engine;
  }

  note(what: string, n = 1) {
    this.world.tally.set(what, (this.world.tally.get(what) ?? 0) + n);
  }

  async setup(run: number) {
    const ws = await tenants(this.engine).createWorkspace(this.world.org, `run-${run}`);
    this.database = await createVectorDatabase(this.engine, ws.id, 'emb');
    this.route = await stampedRoute(this.engine, this.database);
    for (const k of KEYS) {
      this.principals[k] = { kind: 'secret_key', credentialId: `key_${k}_${run}`, organizationId: this.world.org, applicationId: null, workspaceId: null, capabilities: null, userId: null, claims: null, origins: null, permissions: null };
    }
  }

  tag(key: KeyName, scope: ScopeName) {
    return scope === 'shared' ? 'shared' : `local.${this.principals[key].credentialId}`;
  }

  async counters() {
    const d = (await readDatabase(this.engine, this.database.workspace_id))!;
    return { passages: d.passages, bytes: d.bytes };
  }

  /** Every scope as a reader sees it now: each scope's passages (a query matching all), listings, counters. */
  async snapshot() {
    const scopes = [];
    for (const [k, scope] of [['a', 'shared'], ['a', 'local'], ['b', 'local']] as const) {
      const found = await answerQuery(this.engine, this.principals[k], this.database, this.route, parseQueryRequest({ mode: scope, query: 'anything', top_k: 50 }), undefined);
      scopes.push({
        passages: found.matches.map((m) => ({ id: m.id, text: m.text, metadata: m.metadata })).sort((a, b) => (a.id < b.id ? -1 : 1)),
        documents: await listAll(this, k, scope, 100),
      });
    }
    return { scopes, counters: await this.counters() };
  }

  snapshotTags() {
    return [this.tag('a', 'shared'), this.tag('a', 'local'), this.tag('b', 'local')];
  }
}

class Crash extends Error {
  constructor() {
    super('simulated crash');
  }
}

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

/** The engine of a process that dies at its `at`-th write (store or index): that write and every later one fail. */
function dyingEngine(engine: Engine, at: number): { engine: Engine; died: () => boolean } {
  let writes = 0;
  const write = <F extends (...args: never[]) => Promise<unknown>>(f: F) =>
    (async (...args: Parameters<F>) => {
      if (++writes >= at) throw new Crash();
      return f(...args);
    }) as unknown as F;
  const kv = engine.kv;
  const vectors = engine.vectors;
  return {
    engine: patched(engine, {
      kv: patched(kv, { put: write(kv.put.bind(kv)), update: write(kv.update.bind(kv)), delete: write(kv.delete.bind(kv)), transact: write(kv.transact.bind(kv)) }),
      vectors: patched(vectors, { put: write(vectors.put.bind(vectors)), delete: write(vectors.delete.bind(vectors)) }),
    }),
    died: () => writes >= at,
  };
}

/** Every page of a scope's documents, without `updated_at`. */
export async function listAll(real: Real, key: KeyName, scope: ScopeName, limit: number) {
  const listed: unknown[] = [];
  let cursor: string | undefined;
  for (let pages = 0; ; pages++) {
    expect(pages).toBeLessThan(20);
    const page = await documentsPage(real.engine, real.principals[key], real.database, { scope, limit: String(limit), ...(cursor ? { cursor } : {}) });
    expect(page.data.length).toBeLessThanOrEqual(limit);
    listed.push(...page.data.map(({ updated_at: _u, ...d }) => d));
    if (page.next_cursor === null) return listed;
    cursor = page.next_cursor;
  }
}

type Cmd = fc.AsyncCommand<Model, Real>;

/** Passages as a counterexample shows them: a long text by its length. */
const shown = (passages: SentPassage[]) => JSON.stringify(passages.map((p) => (typeof p.text === 'string' && p.text.length > 40 ? { ...p, text: `<${p.text.length} chars>` } : p)));

class IngestCmd implements Cmd {
  constructor(readonly key: KeyName, readonly scope: ScopeName, readonly passages: SentPassage[]) {}
  check = () => true;
  async run(model: Model, real: Real) {
    real.steps++;
    const request = parseIngestRequest(JSON.parse(JSON.stringify({ scope: this.scope, documents: this.passages })));
    const answer = await ingestPassages(real.engine, real.principals[this.key], real.database, real.route, request);
    const expected = model.ingest(real.tag(this.key, this.scope), this.passages);
    expect(answer).toEqual(expected);
    expect(await real.counters()).toEqual(model.counters());
    real.note('ingested', answer.ingested);
    for (const s of answer.skipped) real.note(s.reason);
  }
  toString = () => `ingest(${this.key}, ${this.scope}, ${shown(this.passages)})`;
}

class DeleteCmd implements Cmd {
  constructor(readonly key: KeyName, readonly scope: ScopeName, readonly doc: string) {}
  check = () => true;
  async run(model: Model, real: Real) {
    real.steps++;
    const expected = model.deleteDocument(real.tag(this.key, this.scope), this.doc);
    const answer = await removeDocument(real.engine, real.principals[this.key], real.database, this.doc, { scope: this.scope }).catch((error: unknown) => {
      if (error instanceof PlatformError) return error.code;
      throw error;
    });
    expect(answer).toEqual(expected);
    expect(await real.counters()).toEqual(model.counters());
    real.note(typeof answer === 'string' ? answer : answer.deleted ? 'document deleted' : 'deleted again');
  }
  toString = () => `delete(${this.key}, ${this.scope}, ${this.doc})`;
}

class QueryCmd implements Cmd {
  constructor(readonly key: KeyName, readonly mode: 'shared' | 'local' | 'hybrid', readonly text: string, readonly filter: Record<string, unknown> | undefined) {}
  check = () => true;
  async run(model: Model, real: Real) {
    real.steps++;
    const request = parseQueryRequest({ mode: this.mode, query: this.text, top_k: 50, ...(this.filter ? { filter: this.filter } : {}) });
    const answer = await answerQuery(real.engine, real.principals[this.key], real.database, real.route, request, undefined);
    const scopes: ScopeName[] = this.mode === 'hybrid' ? ['shared', 'local'] : [this.mode];
    const q = fakeVector(this.text);
    const expected = scopes
      .flatMap((scope) => model.visible(real.tag(this.key, scope)).map(([id, p]) => ({ id, p, scope })))
      .filter(({ p }) => filterMatches(p.metadata, this.filter))
      .map(({ id, p, scope }) => ({ key: `${scope}:${id}`, score: cosine(q, fakeVector(p.text)), text: p.text, metadata: p.metadata }));
    expect(expected.length).toBeLessThanOrEqual(50);
    const got = answer.matches.map((m) => ({ key: `${m.scope}:${m.id}`, score: m.score, text: m.text, metadata: m.metadata }));
    const byKey = (a: { key: string }, b: { key: string }) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
    expect([...got].sort(byKey).map(({ score: _s, ...rest }) => rest)).toEqual([...expected].sort(byKey).map(({ score: _s, ...rest }) => rest));
    const scores = new Map(expected.map((e) => [e.key, e.score]));
    for (const m of got) expect(m.score, m.key).toBeCloseTo(scores.get(m.key)!, 4);
    for (let i = 1; i < got.length; i++) expect(got[i].score).toBeLessThanOrEqual(got[i - 1].score + 1e-6);
    expect(answer.retrieval).toEqual({ mode: 'vector', reranked: false, profile: null, outcome: 'none' });
    real.note(got.length ? 'queries with matches' : 'queries without');
    real.note('matches', got.length);
  }
  toString = () => `query(${this.key}, ${this.mode}, ${JSON.stringify(this.text)}, ${JSON.stringify(this.filter)})`;
}

class ListCmd implements Cmd {
  constructor(readonly key: KeyName, readonly scope: ScopeName, readonly limit: number) {}
  check = () => true;
  async run(model: Model, real: Real) {
    real.steps++;
    const listed = await listAll(real, this.key, this.scope, this.limit);
    expect(listed).toEqual(model.documents(real.tag(this.key, this.scope)));
    real.note('documents listed', listed.length);
    if (ORDER_DOCS.every((d) => listed.some((l) => (l as { document_id: string }).document_id === d))) real.note('listings where UTF-8 and UTF-16 orders differ');
  }
  toString = () => `list(${this.key}, ${this.scope}, limit ${this.limit})`;
}

/**
 * A write (an ingest, or a document's deletion) whose process dies at its `at`-th write. Readers then
 * see the scope whole as before it or as after it (it may have committed before dying); once its lease
 * lapses, the next write of the scope rolls it back or finishes it, and everything is as that model says.
 */
class CrashCmd implements Cmd {
  constructor(readonly key: KeyName, readonly scope: ScopeName, readonly write: SentPassage[] | string, readonly at: number) {}
  check = () => true;
  async run(model: Model, real: Real) {
    real.steps++;
    const tag = real.tag(this.key, this.scope);
    const before = model.clone();
    const dying = dyingEngine(real.engine, this.at);
    const principal = real.principals[this.key];
    let answer: unknown;
    try {
      answer =
        typeof this.write === 'string'
          ? await removeDocument(dying.engine, principal, real.database, this.write, { scope: this.scope }).catch((error: unknown) => {
              if (error instanceof PlatformError && error.code === 'document_not_found') return error.code;
              throw error;
            })
          : await ingestPassages(dying.engine, principal, real.database, real.route, parseIngestRequest(JSON.parse(JSON.stringify({ scope: this.scope, documents: this.write }))));
    } catch (error) {
      if (!dying.died()) throw error;
      answer = undefined;
    }
    const expected = typeof this.write === 'string' ? model.deleteDocument(tag, this.write) : model.ingest(tag, this.write);
    if (answer !== undefined) {
      // It finished before its n-th write: an ordinary write (a death in releasing the lease leaves it to lapse).
      expect(answer).toEqual(expected);
      expect(await real.counters()).toEqual(model.counters());
      real.note(dying.died() ? 'crash releasing the lease' : 'no crash');
      real.world.clock.advance(61_000);
      return;
    }
    // Died: readers see it whole or not at all, before and after the next writer's recovery.
    const tags = real.snapshotTags();
    const seen = await real.snapshot();
    const committed = canon(seen) === canon(model.snapshot(tags));
    if (!committed) {
      expect(seen).toEqual(before.snapshot(tags));
      model.scopes = before.scopes;
    }
    real.note(committed ? 'crash after its commit' : 'crash before its commit');
    real.world.clock.advance(61_000); // the dead writer's lease lapses
    const recovery: SentPassage[] = [{ id: 'p5', text: 'recovery write', metadata: { kind: 'a' } }];
    const recovered = await ingestPassages(real.engine, principal, real.database, real.route, parseIngestRequest({ scope: this.scope, documents: recovery }));
    expect(recovered).toEqual(model.ingest(tag, recovery));
    expect(await real.snapshot()).toEqual(model.snapshot(tags));
  }
  toString = () => `crash(${this.key}, ${this.scope}, ${typeof this.write === 'string' ? `delete ${this.write}` : `ingest ${shown(this.write)}`}, at write ${this.at})`;
}

/**
 * Two ingests at once (often in one scope, often of one document): their answers and what they leave
 * are those of one order or the other.
 */
class ConcurrentCmd implements Cmd {
  constructor(readonly writes: [KeyName, ScopeName, SentPassage[]][]) {}
  check = () => true;
  async run(model: Model, real: Real) {
    real.steps++;
    const answers = await Promise.all(
      this.writes.map(([k, scope, passages]) => ingestPassages(real.engine, real.principals[k], real.database, real.route, parseIngestRequest(JSON.parse(JSON.stringify({ scope, documents: passages }))))),
    );
    const tags = real.snapshotTags();
    const seen = canon({ answers, snapshot: await real.snapshot() });
    const orders = [[0, 1], [1, 0]].map((order) => {
      const m = model.clone();
      const expected: unknown[] = [];
      for (const i of order) expected[i] = m.ingest(real.tag(this.writes[i][0], this.writes[i][1]), this.writes[i][2]);
      return { order, m, text: canon({ answers: expected, snapshot: m.snapshot(tags) }) };
    });
    const match = orders.find((o) => o.text === seen);
    if (!match) expect(JSON.parse(seen)).toEqual(JSON.parse(orders[0].text)); // neither order: show the difference from the first
    model.scopes = match!.m.scopes;
    real.note(orders[0].text === orders[1].text ? 'concurrent, orders alike' : `concurrent, order ${match!.order.join('')}`);
  }
  toString = () => `concurrently(${this.writes.map(([k, s, p]) => `ingest(${k}, ${s}, ${shown(p)})`).join(', ')})`;
}

const key = fc.constantFrom<KeyName>(...KEYS);
const scope = fc.constantFrom<ScopeName>('shared', 'shared', 'local');
const commands: fc.Arbitrary<Cmd>[] = [
  fc.oneof(
    { arbitrary: fc.tuple(key, scope, fc.array(passage, { minLength: 1, maxLength: 5 })).map(([k, s, p]) => new IngestCmd(k, s, p) as Cmd), weight: 6 },
    { arbitrary: fc.tuple(key, scope, documentId).map(([k, s, d]) => new DeleteCmd(k, s, d) as Cmd), weight: 1 },
    { arbitrary: fc.tuple(key, fc.constantFrom<'shared' | 'local' | 'hybrid'>('shared', 'shared', 'local', 'hybrid', 'hybrid'), fc.constantFrom(...QUERIES), fc.constantFrom(...FILTERS)).map(([k, m, t, f]) => new QueryCmd(k, m, t, f) as Cmd), weight: 3 },
    { arbitrary: fc.tuple(key, scope, fc.integer({ min: 1, max: 3 })).map(([k, s, l]) => new ListCmd(k, s, l) as Cmd), weight: 2 },
    {
      arbitrary: fc
        .tuple(key, scope, fc.oneof({ arbitrary: fc.array(passage, { minLength: 1, maxLength: 5 }), weight: 3 }, { arbitrary: documentId, weight: 1 }), fc.integer({ min: 1, max: 16 }))
        .map(([k, s, w, at]) => new CrashCmd(k, s, w, at) as Cmd),
      weight: 1,
    },
    {
      arbitrary: fc
        .tuple(key, scope, fc.array(passage, { minLength: 1, maxLength: 4 }), fc.option(fc.tuple(key, scope), { freq: 3 }), fc.array(passage, { minLength: 1, maxLength: 4 }))
        .map(([k, s, p, other, q]) => new ConcurrentCmd([[k, s, p], [...(other ?? [k, s]), q] as [KeyName, ScopeName, SentPassage[]]]) as Cmd),
      weight: 2,
    },
  ),
];

/** How long and how many: the environment's FC_RUNS and FC_COMMANDS win over them. */
export interface VectorModelRuns {
  numRuns: number;
  maxCommands: number;
  /** No run starts after this long. */
  timeLimitMs: number;
}

/** Runs the model against `world`; throws fast-check's report (its seed and path) at a difference. */
export async function checkVectorModel(world: VectorWorld, limits: VectorModelRuns): Promise<{ seed: number; runs: number; steps: number; stats: Record<string, number> }> {
  const env = process.env;
  const seed = env.FC_SEED ? Number(env.FC_SEED) : (Date.now() ^ (Math.random() * 0x100000000)) | 0;
  let runs = 0;
  let steps = 0;
  // Not fast-check's interruptAfterTimeLimit: it abandons the run in flight, whose writes and embeddings
  // calls then go on under the next test (and a difference it finds is dropped). Past the limit, a run
  // is empty instead: it passes at once (also ending a shrink).
  const deadline = Date.now() + limits.timeLimitMs;
  const property = fc.asyncProperty(fc.commands(commands, { maxCommands: env.FC_COMMANDS ? Number(env.FC_COMMANDS) : limits.maxCommands, size: 'max' }), async (cmds) => {
    if (Date.now() > deadline) return;
    const real = new Real(world);
    await real.setup(runs++);
    try {
      await fc.asyncModelRun(() => ({ model: new Model(), real }), cmds);
    } finally {
      steps += real.steps;
    }
  });
  await fc.assert(property, {
    numRuns: env.FC_RUNS ? Number(env.FC_RUNS) : limits.numRuns,
    seed,
    path: env.FC_PATH,
    endOnFailure: env.FC_SHRINK === '0',
  });
  return { seed, runs, steps, stats: Object.fromEntries([...world.tally].sort()) };
}

/**
 * Found by this model: a passage refused before the embeddings call (ingest.ts checks generations
 * first, so refused passages are not embedded) must be decided again at the commit, when another write
 * committed to its document meanwhile. Here the document d0 is new when B checks it (p0 without a
 * generation would be generation 1, below B's own 2: stale), A commits d0 at generation 2, then B
 * commits: serialized after A, p0 joins generation 2 (and is embedded then).
 */
export async function checkAnswerAsOfCommit(world: VectorWorld) {
  const { embedder } = world;
  const real = new Real(world);
  await real.setup(-1);
  const write = (documents: SentPassage[]) => ingestPassages(real.engine, real.principals.a, real.database, real.route, parseIngestRequest({ scope: 'shared', documents }));
  embedder.behavior.stallMs = 1_000;
  const calls = embedder.calls.length;
  const b = write([{ id: 'p4', text: 'purr purr', document_id: 'd0', generation: 2 }, { id: 'p0', text: 'cats purr softly', document_id: 'd0' }]);
  try {
    while (embedder.calls.length === calls) await new Promise((resolve) => setTimeout(resolve, 5));
  } finally {
    embedder.behavior.stallMs = 0;
  }
  expect(await write([{ id: 'p4', text: 'cats purr softly', document_id: 'd0', generation: 2 }, { id: 'p0', text: 'cats purr softly' }])).toEqual({ ingested: 2, skipped: [] });
  const answer = await b;
  const listed = await listAll(real, 'a', 'shared', 100);
  // B committed after A (its p4 replaced A's): serialized after A, p0 joins generation 2.
  expect({ answer, listed: listed.map((d: any) => [d.document_id, d.generation, d.passages]) }).toEqual({ answer: { ingested: 2, skipped: [] }, listed: [['d0', 2, 2]] });
}


/** A passage of `text` is ingested and found (a fresh database: workspace `run-<run>`). */
export async function checkPassageStored(world: VectorWorld, run: number, text: string) {
  const real = new Real(world);
  await real.setup(run);
  const answer = await ingestPassages(real.engine, real.principals.a, real.database, real.route, parseIngestRequest({ scope: 'shared', documents: [{ id: 'p0', text }] }));
  expect(answer).toEqual({ ingested: 1, skipped: [] });
  const found = await answerQuery(real.engine, real.principals.a, real.database, real.route, parseQueryRequest({ mode: 'shared', query: 'anything', top_k: 5 }), undefined);
  expect(found.matches.map((m) => m.text === text)).toEqual([true]);
}

/**
 * Calls at the spec's limits, which the model's small batches never reach: 100 passages of 100
 * documents, then 100 passages replacing one document's generation twice, then its deletion. On
 * DynamoDB a transaction takes 100 items, so the ledger splits these (49 passages, 99 documents a
 * transaction); answers, listings and counters must be the model's.
 */
export async function checkFullCalls(world: VectorWorld, run: number) {
  const real = new Real(world);
  await real.setup(run);
  const model = new Model();
  const tag = real.tag('a', 'shared');
  const same = async () => {
    expect(await listAll(real, 'a', 'shared', 100)).toEqual(model.documents(tag));
    expect(await real.counters()).toEqual(model.counters());
  };
  const ingest = async (passages: SentPassage[]) => {
    const answer = await ingestPassages(real.engine, real.principals.a, real.database, real.route, parseIngestRequest({ scope: 'shared', documents: passages }));
    expect(answer).toEqual(model.ingest(tag, passages));
    await same();
  };
  const text = (i: number) => TEXTS[i % TEXTS.length];
  await ingest(Array.from({ length: 100 }, (_, i) => ({ id: `s${i}`, text: text(i), metadata: { kind: i % 2 ? 'a' : 'b' }, document_id: `doc${i}` })));
  await ingest(Array.from({ length: 100 }, (_, i) => ({ id: `g2-${i}`, text: text(i + 1), document_id: 'big', generation: 2 })));
  await ingest(Array.from({ length: 100 }, (_, i) => ({ id: `g3-${i}`, text: text(i + 2), document_id: 'big', generation: 3 })));
  const removed = await removeDocument(real.engine, real.principals.a, real.database, 'big', { scope: 'shared' });
  expect(removed).toEqual(model.deleteDocument(tag, 'big'));
  await same();
  // The index holds what the ledger names: the 50 passages of kind b, all of top_k 50, none of the deleted document's.
  const found = await answerQuery(real.engine, real.principals.a, real.database, real.route, parseQueryRequest({ mode: 'shared', query: 'cats', top_k: 50, filter: { kind: 'b' } }), undefined);
  expect(found.matches.map((m) => m.id).sort()).toEqual(model.visible(tag).filter(([, p]) => p.metadata.kind === 'b').map(([id]) => id).sort());
}

/**
 * A write of more passages than one store transaction takes (50: the ledger writes 49 a transaction),
 * killed at each of its writes in turn (a fresh database each time): readers see the scope whole as
 * before it or after it, and the next writer rolls it back or finishes it, as the crash command checks.
 * Sized so every state fits one query's top_k of 50. Returns how many writes the call makes.
 */
export async function checkCrashesOfLargeWrite(world: VectorWorld, firstRun: number): Promise<number> {
  const before: SentPassage[] = Array.from({ length: 10 }, (_, i) => ({ id: `b${i}`, text: TEXTS[i % TEXTS.length], document_id: 'big', generation: 1 }));
  // p5, the crash command's recovery write, leaves the document then: every state stays within 50.
  const write: SentPassage[] = ['p5', ...Array.from({ length: 49 }, (_, i) => `c${i}`)].map((id, i) => ({ id, text: TEXTS[(i + 3) % TEXTS.length], document_id: 'big', generation: 2 }));
  const finished = () => world.tally.get('no crash') ?? 0;
  for (let at = 1; ; at++) {
    expect(at).toBeLessThan(100);
    const real = new Real(world);
    await real.setup(firstRun - at);
    const model = new Model();
    await new IngestCmd('a', 'shared', before).run(model, real);
    const done = finished();
    await new CrashCmd('a', 'shared', write, at).run(model, real);
    if (finished() > done) return at - 1;
  }
}

/**
 * The model's tests on one engine: the random runs (`runs`), then the fixed cases every engine must
 * pass (the spec's limits, a write killed at each of its writes, answers in commit order, passages
 * whose JSON would be too large). `world` is read when the tests run (made in the file's beforeAll).
 */
export function vectorModelTests(engineName: string, world: () => VectorWorld, runs: VectorModelRuns, modelTimeoutMs: number): void {
  it(`ingest, delete, query and list behave like the model (${engineName})`, { timeout: modelTimeoutMs }, async () => {
    const started = Date.now();
    const done = await checkVectorModel(world(), runs);
    console.log(`vector model (${engineName}, FC_SEED=${done.seed}): ${done.runs} runs, ${done.steps} steps in ${((Date.now() - started) / 1000).toFixed(1)} s`, done.stats);
    expect(done.steps).toBeGreaterThan(0);
  });

  it('answers, lists and counts like the model at the spec limits (100 passages a call, 100 documents)', { timeout: 30_000 }, async () => {
    await checkFullCalls(world(), -4);
  });

  it('a write of two store transactions killed at each of its writes is seen whole, then finished or undone', { timeout: 40_000 }, async () => {
    const writes = await checkCrashesOfLargeWrite(world(), -10);
    console.log(`a 50-passage write killed at each of its ${writes} writes`);
  });

  it('a write answers as of its commit, even when another commits to its document during its embeddings call', async () => {
    await checkAnswerAsOfCommit(world());
  });

  // As JSON, 10 KiB of quotes is 20 KiB and 6,000 control characters 36 KB: over the index's 32 KiB
  // payload and S3 Vectors' 40 KB of metadata. The payload is not JSON (vector/payload.ts).
  it('stores a passage of 10 KiB that JSON escapes to twice its size', async () => {
    await checkPassageStored(world(), -2, ESCAPED_TEXTS.quotes);
  });

  it('stores a passage of 6,000 control characters (6 KB; its JSON would be 36 KB)', async () => {
    await checkPassageStored(world(), -3, ESCAPED_TEXTS.controls);
  });
}
