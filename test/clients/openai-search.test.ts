/**
 * OpenAI's vector store search through the official SDK, unchanged (`client.vectorStores.search`), over
 * the local platform with the fake embedder: the page's shape with our citation, the PDF page that
 * answers first, several queries merged one result a chunk, `max_num_results`, `score_threshold`,
 * filters on the files' attributes (eq, gte, in, and, or), the same answers whether the index keeps
 * to the filtered items (`item $in`) or the hits are read and the others dropped, and another
 * organization's store (404). The stores and their files are made with the SDK (files uploaded through
 * /v1/uploads), one item added through /v1/collections.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { vectorStoreFilesPartition } from '../../lambdas/ai/openai-compat/keys.js';
import { collectionKey } from '../../lambdas/knowledge/collection-keys.js';
import { ENTRIES_HAVE_ITEM } from '../../lambdas/knowledge/chunk-index.js';
import { addItem, call, createCollection, settledCollection, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { pdfFile } from '../helpers/knowledge-files.js';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';

const PAGES = [
  ['Page one is about the harbour and its lighthouse keepers.'],
  ['Page two explains the volcanic geology of the island in detail.'],
  ['Page three lists the ferry timetable for the winter season.'],
];

/** The files of each store: their text or the PDF, and attributes (null: added through /v1/collections, no vector store file record). */
const FILES = {
  pdf: { attributes: { lang: 'en', year: 2024, kind: 'guide' } },
  ferry: { text: 'The winter ferry timetable: boats leave the harbour at eight and at four.', filename: 'ferry.txt', attributes: { lang: 'fr', year: 2019 } },
  birds: { text: 'Puffins nest on the volcanic cliffs every spring.', filename: 'birds.txt', attributes: { lang: 'en', year: 2021, kind: 'nature' } },
  notes: { text: 'Ash covers the northern trail after eruptions.', filename: 'notes.txt', attributes: null },
} as const;
type FileName = keyof typeof FILES;

interface Store {
  id: string;
  vs: string;
  /** item id → file name, and file name → file id as search answers it. */
  nameOf: Map<string, FileName>;
  fileId: Record<FileName, string>;
}

let w: OpenAiWorld;
let c: Client;
let client: OpenAI;
/** The index keeps to the filtered items (`entries_have_item`), and the store whose hits are read instead. */
let pushed: Store;
let scanned: Store;

const vsOf = (collectionId: string) => `vs_${collectionId.slice(4)}`;

/**
 * A vector store made with the SDK, its files uploaded through /v1/uploads (any completed upload is a
 * file) and attached with their attributes by `vectorStores.files.create`; `notes` added through
 * /v1/collections, so it has no vector store file record and no attributes.
 */
async function makeStore(name: string, itemKeyed: boolean): Promise<Store> {
  const vs = await client.vectorStores.create({ name });
  const id = `col_${vs.id.slice(3)}`;
  const key = collectionKey(w.p.credentials.organization_id, w.p.credentials.workspace_id, id);
  expect(await w.p.engine.kv.get(key), 'the store’s collection lives in the credential’s workspace').toBeDefined();
  // The mark a collection carries when every index entry of it names its item; removed for the store
  // standing for one made before the key existed (its hits are read and filtered instead).
  await w.p.engine.kv.update({ key, ...(itemKeyed ? { set: { [ENTRIES_HAVE_ITEM]: true } } : { remove: [ENTRIES_HAVE_ITEM] }) });
  const nameOf = new Map<string, FileName>();
  const fileId = {} as Record<FileName, string>;
  for (const file of Object.keys(FILES) as FileName[]) {
    const spec = FILES[file];
    if (!spec.attributes) {
      const s = spec as { text: string; filename: string };
      const added = await addItem(c, id, { text: s.text, filename: s.filename });
      expect(added.status, added.text).toBe(202);
      fileId[file] = added.body.item_id as string;
      nameOf.set(fileId[file], file);
      continue;
    }
    fileId[file] =
      file === 'pdf'
        ? await uploadFile(c, await pdfFile(PAGES), 'island.pdf', 'application/pdf')
        : await uploadFile(c, Buffer.from((spec as { text: string }).text), (spec as { filename: string }).filename, 'text/plain');
    const attached = await client.vectorStores.files.create(vs.id, { file_id: fileId[file], attributes: spec.attributes });
    expect(attached.attributes).toEqual(spec.attributes);
  }
  // Which item each file became, from the store's file records (the search cites items).
  const records = await w.p.engine.kv.query({ pk: vectorStoreFilesPartition(w.p.credentials.organization_id, w.p.credentials.workspace_id, id) });
  for (const r of records.items) nameOf.set(String(r.sk), (Object.keys(FILES) as FileName[]).find((f) => fileId[f] === r.file_id)!);
  expect(nameOf.size).toBe(4);
  return { id, vs: vs.id, nameOf, fileId };
}

beforeAll(async () => {
  w = await startOpenAiWorld();
  c = { url: w.p.urls.ai, key: w.p.credentials.secret_key };
  client = w.client;
  [pushed, scanned] = await Promise.all([makeStore('Island', true), makeStore('Island (older)', false)]);
  for (const s of [pushed, scanned]) expect((await settledCollection(c, s.id)).counts).toMatchObject({ done: 4, failed: 0 });
}, 120_000);

afterAll(async () => {
  await w?.close();
});

type Result = OpenAI.VectorStores.VectorStoreSearchResponse & { citation: { collection_id: string; item_id: string; package_id: string; chunk_id: string; locator: string } };
const results = (page: { data: unknown[] }) => page.data as Result[];
const namesIn = (store: Store, page: { data: unknown[] }) => [...new Set(results(page).map((r) => store.nameOf.get(r.citation.item_id)!))].sort();

describe('vectorStores.search', () => {
  it('answers OpenAI’s page: the PDF’s page 2 first, with its file, attributes, text and our citation', async () => {
    const page = await client.vectorStores.search(pushed.vs, { query: 'volcanic geology' });
    const body = (page as unknown as { body: Record<string, unknown> }).body;
    expect(body).toMatchObject({ object: 'vector_store.search_results.page', search_query: ['volcanic geology'], has_more: false, next_page: null });
    expect(page.object).toBe('vector_store.search_results.page');
    const [first] = results(page);
    expect(first).toEqual({
      file_id: pushed.fileId.pdf,
      filename: 'island.pdf',
      score: expect.any(Number),
      attributes: { lang: 'en', year: 2024, kind: 'guide' },
      content: [{ type: 'text', text: expect.stringContaining('volcanic geology') }],
      citation: { collection_id: pushed.id, item_id: expect.stringMatching(/^itm_/), package_id: expect.stringMatching(/^pkg_/), chunk_id: expect.stringMatching(/^chk_/), locator: 'page=2' },
    });
    expect(pushed.nameOf.get(first.citation.item_id)).toBe('pdf');
    const scores = results(page).map((r) => r.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    // A file added as text has no upload: its item is its id; one with no vector store file record has no attributes.
    const notes = results(page).find((r) => pushed.nameOf.get(r.citation.item_id) === 'notes');
    expect(notes).toMatchObject({ file_id: notes!.citation.item_id, filename: 'notes.txt', attributes: null });
  });

  it('takes the col_ id too, and answers the same', async () => {
    const byVs = results(await client.vectorStores.search(pushed.vs, { query: 'volcanic geology' }));
    const byCol = results(await client.vectorStores.search(pushed.id, { query: 'volcanic geology' }));
    expect(byCol.map((r) => r.citation.chunk_id + r.citation.item_id)).toEqual(byVs.map((r) => r.citation.chunk_id + r.citation.item_id));
  });

  it('merges several queries by score, one result a chunk, with one embeddings call', async () => {
    const calls = w.embedder.calls.length;
    const page = await client.vectorStores.search(pushed.vs, { query: ['volcanic geology', 'winter ferry timetable', 'volcanic geology'] });
    expect(w.embedder.calls.length - calls).toBe(1);
    expect((page as unknown as { body: { search_query: string[] } }).body.search_query).toEqual(['volcanic geology', 'winter ferry timetable', 'volcanic geology']);
    const chunks = results(page).map((r) => `${r.citation.item_id}/${r.citation.chunk_id}`);
    expect(new Set(chunks).size).toBe(chunks.length);
    expect(namesIn(pushed, page)).toEqual(expect.arrayContaining(['pdf', 'ferry']));
  });

  it('keeps max_num_results, and drops what scores under score_threshold', async () => {
    const all = results(await client.vectorStores.search(pushed.vs, { query: 'volcanic geology island', max_num_results: 50 }));
    expect(all.length).toBeGreaterThan(2);
    const two = results(await client.vectorStores.search(pushed.vs, { query: 'volcanic geology island', max_num_results: 2 }));
    expect(two.map((r) => r.score)).toEqual(all.slice(0, 2).map((r) => r.score));
    const threshold = (all[0].score + all[1].score) / 2;
    expect(all[0].score).toBeGreaterThan(all[1].score);
    const above = results(await client.vectorStores.search(pushed.vs, { query: 'volcanic geology island', max_num_results: 50, ranking_options: { ranker: 'none', score_threshold: threshold } }));
    expect(above.map((r) => r.score)).toEqual(all.filter((r) => r.score >= threshold).map((r) => r.score));
    expect(above.length).toBeGreaterThan(0);
  });

  it('filters on attributes (eq, gte, in, and, or) the same whether the index keeps to the items or the hits are read', async () => {
    const cases: Array<[OpenAI.VectorStores.VectorStoreSearchParams['filters'], FileName[]]> = [
      [{ type: 'eq', key: 'lang', value: 'fr' }, ['ferry']],
      [{ type: 'gte', key: 'year', value: 2021 }, ['birds', 'pdf']],
      [{ type: 'in', key: 'kind', value: ['nature', 'manual'] }, ['birds']],
      [{ type: 'and', filters: [{ type: 'eq', key: 'lang', value: 'en' }, { type: 'lt', key: 'year', value: 2022 }] }, ['birds']],
      [{ type: 'or', filters: [{ type: 'eq', key: 'kind', value: 'guide' }, { type: 'eq', key: 'lang', value: 'fr' }] }, ['ferry', 'pdf']],
      // A missing key never matches, `ne` included: ferry has no `kind`, notes no attributes at all.
      [{ type: 'ne', key: 'kind', value: 'guide' }, ['birds']],
      [{ type: 'eq', key: 'lang', value: 'de' }, []],
    ];
    for (const [filters, expected] of cases) {
      for (const store of [pushed, scanned]) {
        const page = await client.vectorStores.search(store.vs, { query: 'volcanic geology ferry timetable harbour puffins', max_num_results: 50, filters });
        expect(namesIn(store, page), `${JSON.stringify(filters)} on ${store === pushed ? 'item-keyed' : 'older'} store`).toEqual(expected);
      }
    }
  });

  it('filters on attributes as updated, at once (vectorStores.files.update rewrites no vector)', async () => {
    const filters = { type: 'eq' as const, key: 'lang', value: 'de' };
    const search = () => client.vectorStores.search(pushed.vs, { query: 'puffins volcanic cliffs', filters });
    expect((await search()).data).toEqual([]);
    await client.vectorStores.files.update(pushed.fileId.birds, { vector_store_id: pushed.vs, attributes: { ...FILES.birds.attributes, lang: 'de' } });
    try {
      const page = await search();
      expect(namesIn(pushed, page)).toEqual(['birds']);
      expect(results(page)[0].attributes).toEqual({ ...FILES.birds.attributes, lang: 'de' });
    } finally {
      await client.vectorStores.files.update(pushed.fileId.birds, { vector_store_id: pushed.vs, attributes: FILES.birds.attributes });
    }
  });

  it('embeds nothing when no file matches the filter', async () => {
    const calls = w.embedder.calls.length;
    const page = await client.vectorStores.search(pushed.vs, { query: 'volcanic', filters: { type: 'eq', key: 'lang', value: 'de' } });
    expect(page.data).toEqual([]);
    expect(w.embedder.calls.length).toBe(calls);
  });

  it('writes the item key on the index entries it searches by', async () => {
    const index = String((await w.p.engine.kv.get(collectionKey(w.p.credentials.organization_id, w.p.credentials.workspace_id, pushed.id)))!.index);
    const items = new Set<string>();
    let cursor: string | undefined;
    do {
      const page = await w.p.engine.vectors.list(index, { limit: 1000, cursor });
      for (const e of page.entries) if (e.filterable.scope === `col.${pushed.id}`) items.add(String(e.filterable.item));
      cursor = page.cursor;
    } while (cursor);
    expect([...items].sort()).toEqual([...pushed.nameOf.keys()].sort());
  });

  it('replays the kept answer for the same Idempotency-Key', async () => {
    const key = `search-${Date.now()}`;
    const first = await client.vectorStores.search(pushed.vs, { query: 'puffins' }, { headers: { 'Idempotency-Key': key } }).withResponse();
    const again = await client.vectorStores.search(pushed.vs, { query: 'puffins' }, { headers: { 'Idempotency-Key': key } }).withResponse();
    expect(again.response.headers.get('x-idempotent-replay')).toBe('true');
    expect(again.data.data).toEqual(first.data.data);
  });

  it('refuses what OpenAI bounds with 400, naming the field', async () => {
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ query: 'x', max_num_results: 0 }, 'max_num_results'],
      [{ query: 'x', max_num_results: 51 }, 'max_num_results'],
      [{ query: 'x', ranking_options: { score_threshold: 2 } }, 'ranking_options.score_threshold'],
      [{ query: ['a', 'b', 'c', 'd', 'e', 'f'] }, 'query'],
      [{ query: 'x', filters: { type: 'in', key: 'k', value: Array.from({ length: 101 }, (_, i) => i) } }, 'filters.value'],
    ];
    for (const [body, param] of bad) {
      const error = await client.vectorStores.search(pushed.vs, body as never).catch((e: unknown) => e);
      expect(error, JSON.stringify(body).slice(0, 60)).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ status: 400, param, code: 'invalid_body' });
    }
    const unknown = await client.vectorStores.search(pushed.vs, { query: 'x', top_k: 3 } as never).catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 400, code: 'unsupported_field', param: 'top_k' });
    const deep = { type: 'and', filters: [{ type: 'eq', key: 'k', value: 1 }] } as Record<string, unknown>;
    let f = deep;
    for (let i = 0; i < 10; i++) f = { type: 'or', filters: [f] };
    const tooDeep = await client.vectorStores.search(pushed.vs, { query: 'x', filters: f as never }).catch((e: unknown) => e);
    expect(tooDeep).toMatchObject({ status: 400, code: 'invalid_body' });
  });

  it('refuses hostile filters over HTTP with a 4xx, never a 500: 10,000 levels deep, a million-value list, __proto__ keys', async () => {
    const raw = (body: string) =>
      fetch(`${w.p.urls.ai}/v1/vector_stores/${pushed.vs}/search`, { method: 'POST', headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' }, body });
    // 10,000 levels fit the body limit as bare arrays; 5,000 filter objects would not (413 first).
    for (const deep of [
      `{"query":"x","filters":{"type":"and","filters":${'['.repeat(10_000)}${']'.repeat(10_000)}}}`,
      `{"query":"x","filters":${'{"type":"or","filters":['.repeat(5_000)}{"type":"eq","key":"k","value":1}${']}'.repeat(5_000)}}`,
    ]) {
      const tooDeep = await raw(deep);
      expect(tooDeep.status).toBeLessThan(500);
      expect(tooDeep.status).toBeGreaterThanOrEqual(400);
    }
    const nine = `{"query":"x","filters":${'{"type":"or","filters":['.repeat(9)}{"type":"eq","key":"k","value":1}${']}'.repeat(9)}}`;
    const tooDeep = await raw(nine);
    expect([tooDeep.status, ((await tooDeep.json()) as { error: { code: string } }).error.code]).toEqual([400, 'invalid_body']);
    const huge = await raw(JSON.stringify({ query: 'x', filters: { type: 'in', key: 'k', value: Array.from({ length: 1_000_000 }, (_, i) => i) } }));
    expect(huge.status).toBe(413);
    const proto = await raw('{"query":"volcanic","filters":{"type":"eq","key":"__proto__","value":"x"}}');
    expect([proto.status, ((await proto.json()) as { data: unknown[] }).data]).toEqual([200, []]);
    const protoField = await raw('{"query":"volcanic","filters":{"type":"eq","key":"k","value":1,"__proto__":{"type":"or"}}}');
    expect([protoField.status, ((await protoField.json()) as { error: { code: string } }).error.code]).toEqual([400, 'unsupported_field']);
  });

  it('answers 404 for another organization’s store, a collection that is no vector store, and an unknown id', async () => {
    const other = await w.otherOrganization();
    const theirs = await other.client.vectorStores.search(pushed.vs, { query: 'volcanic' }).catch((e: unknown) => e);
    expect(theirs).toBeInstanceOf(OpenAI.NotFoundError);
    expect(theirs).toMatchObject({ status: 404, code: 'collection_not_found' });
    const download = await createCollection(c, 'download');
    for (const id of [vsOf(download), 'vs_00000000000000000000000000000000', 'vs_nope']) {
      const error = await client.vectorStores.search(id, { query: 'volcanic' }).catch((e: unknown) => e);
      expect(error, id).toBeInstanceOf(OpenAI.NotFoundError);
    }
    // The owner still finds it: the 404 is the tenancy, not the store.
    expect((await client.vectorStores.search(pushed.vs, { query: 'volcanic' })).data.length).toBeGreaterThan(0);
    expect((await call(c, 'GET', `/v1/collections/${pushed.id}`)).status).toBe(200);
  });
});
