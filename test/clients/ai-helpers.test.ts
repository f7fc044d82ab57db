/**
 * The typed client's AI helpers (clients/typescript/src/ai.ts) against the local platform, with the
 * fake embeddings upstream: a Markdown file uploaded in one part and a larger one from a Blob in two
 * (a resumed upload sends only its missing part), added to a `cloud` collection, waited for and
 * queried with a citation; the vector database ingested, filtered, queried and a document deleted;
 * and every error thrown as a PlatformApiError with the platform's code and param.
 */
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addCollectionItem,
  createAiClient,
  deleteVectorDocument,
  PlatformApiError,
  queryCollection,
  unwrap,
  uploadFile,
  vectorIngest,
  vectorQuery,
  waitForItem,
  type AiClient,
} from '../../clients/typescript/src/index.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { GUIDE } from '../helpers/island-guide.js';


/** An item's processing (a process of its own per file) takes seconds, more on a busy machine. */
const PROCESSING = { intervalMs: 50, timeoutMs: 90_000 };

let p: TestPlatform;
let embedder: FakeEmbedder;
let ai: AiClient;
/** Every request the client sent, as `METHOD path`. */
const sent: string[] = [];

const thrown = async (promise: Promise<unknown>): Promise<PlatformApiError> => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PlatformApiError);
  return error as PlatformApiError;
};

beforeAll(async () => {
  p = await startTestPlatform();
  embedder = await startFakeEmbedder();
  const org = p.credentials.organization_id;
  await new ModelRoutes(p.engine.kv, () => p.engine.clock.now()).set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000, default: true });
  await createVectorDatabase(p.engine, p.credentials.workspace_id, 'emb');
  ai = createAiClient({
    baseUrl: p.urls.ai,
    credential: p.credentials.secret_key,
    // The global fetch at call time: the suite's OpenAPI check wraps it.
    fetch: (input: string | URL | Request, init?: RequestInit) => {
      const request = input instanceof Request ? input : new Request(input, init);
      sent.push(`${request.method} ${new URL(request.url).pathname}`);
      return fetch(input, init);
    },
  });
});

afterAll(async () => {
  await embedder?.close();
  await p?.close();
});

describe('uploadFile', () => {
  it('uploads a small file in one part, completes it and answers it completed', async () => {
    sent.length = 0;
    const bytes = Buffer.from(GUIDE);
    const upload = await uploadFile(ai, bytes, { filename: 'guide.md', contentType: 'text/markdown', keepSourceHours: 2 });
    expect(upload).toMatchObject({
      object: 'upload',
      filename: 'guide.md',
      content_type: 'text/markdown',
      size: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
      status: 'completed',
      part_count: 1,
      parts_received: [1],
      keep_source_hours: 2,
      parts: [],
    });
    expect(upload.id).toMatch(/^upl_[0-9a-f]{32}$/);
    expect(sent).toEqual(['POST /v1/uploads', `PUT /v1/uploads/${upload.id}/parts/1`, `POST /v1/uploads/${upload.id}/complete`]);
  });

  it('cuts a Blob into the parts the platform asks for, and a second call with the same id sends only what is missing', async () => {
    const size = 5 * 1024 * 1024 + 1000;
    const bytes = new Uint8Array(size).map((_, i) => (i * 31) % 251);
    const id = `resume-${randomUUID()}`;
    // A client cut off after part 1: started, sent part 1 itself, never completed.
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const started = unwrap(await ai.POST('/v1/uploads', { params: { header: { 'X-Operation-Id': id } }, body: { filename: 'data.bin', content_type: 'application/octet-stream', size, sha256 } }));
    expect(started.parts.map((part) => [part.number, part.size])).toEqual([
      [1, 5 * 1024 * 1024],
      [2, 1000],
    ]);
    unwrap(
      await ai.PUT('/v1/uploads/{id}/parts/{n}', {
        params: { path: { id, n: '1' } },
        body: bytes.subarray(0, 5 * 1024 * 1024) as unknown as string,
        bodySerializer: (b: unknown) => b as RequestInit['body'],
        headers: { 'Content-Type': 'application/octet-stream' },
      }),
    );
    sent.length = 0;
    const upload = await uploadFile(ai, new Blob([bytes]), { filename: 'data.bin', contentType: 'application/octet-stream', uploadId: id });
    expect(upload).toMatchObject({ id, status: 'completed', size, sha256, part_count: 2, parts_received: [1, 2] });
    expect(sent).toEqual(['POST /v1/uploads', `PUT /v1/uploads/${id}/parts/2`, `POST /v1/uploads/${id}/complete`]);
  });

  it('throws the platform’s hash_mismatch when the bytes are not the announced ones', async () => {
    const error = await thrown(uploadFile(ai, Buffer.from('these bytes'), { filename: 'x.txt', contentType: 'text/plain', sha256: 'a'.repeat(64) }));
    expect(error).toMatchObject({ status: 400, code: 'hash_mismatch', param: 'sha256' });
    expect(error.requestId).toBeTruthy();
  });

  it('reads an upload whose check outlasts the complete (202 verifying) until it is completed, or throws its failure', { timeout: 90_000 }, async () => {
    // The complete stops its own check at once: the background check settles the upload.
    useSettings({ uploadCheckWithinMs: 0 });
    try {
      sent.length = 0;
      const upload = await uploadFile(ai, Buffer.from(GUIDE), { filename: 'guide.md', contentType: 'text/markdown' });
      expect(upload).toMatchObject({ status: 'completed', completed_at: expect.any(String) });
      expect(sent.slice(0, 3)).toEqual(['POST /v1/uploads', `PUT /v1/uploads/${upload.id}/parts/1`, `POST /v1/uploads/${upload.id}/complete`]);
      expect(sent.slice(3)).toContain(`GET /v1/uploads/${upload.id}`);

      const wrong = await thrown(uploadFile(ai, Buffer.from('other bytes'), { filename: 'x.txt', contentType: 'text/plain', sha256: 'b'.repeat(64) }));
      expect(wrong).toMatchObject({ status: 400, code: 'hash_mismatch', param: 'sha256' });
    } finally {
      useSettings(undefined);
    }
  });

  it('throws invalid_body naming the field for an announcement the platform refuses', async () => {
    const error = await thrown(uploadFile(ai, Buffer.from('x'), { filename: 'x.txt', contentType: 'text/plain', keepSourceHours: 500 }));
    expect(error).toMatchObject({ status: 400, code: 'invalid_body', param: 'keep_source_hours' });
  });
});

describe('a cloud collection through the helpers', () => {
  let collection: string;

  beforeAll(async () => {
    collection = unwrap(await ai.POST('/v1/collections', { body: { mode: 'cloud', name: 'Island' } })).id;
  });

  it('adds an uploaded file, waits for it and finds the passage that answers, with its citation', { timeout: 2 * PROCESSING.timeoutMs }, async () => {
    const upload = await uploadFile(ai, Buffer.from(GUIDE), { filename: 'guide.md', contentType: 'text/markdown' });
    const queued = await addCollectionItem(ai, collection, { upload_id: upload.id });
    expect(queued).toMatchObject({ object: 'collection.item', collection_id: collection, upload_id: upload.id, filename: 'guide.md', status: 'queued' });
    const item = await waitForItem(ai, collection, queued.item_id, PROCESSING);
    expect(item).toMatchObject({ item_id: queued.item_id, status: 'done', error: null, package_id: expect.stringMatching(/^pkg_/) });
    expect(item.chunk_count).toBeGreaterThan(0);

    const answer = await queryCollection(ai, collection, { query: 'When does the winter ferry leave the harbour?', top_k: 2 });
    expect(answer.collection_id).toBe(collection);
    expect(answer.matches[0]).toMatchObject({
      text: expect.stringContaining('The winter ferry leaves the harbour at 08:00 and 16:00.'),
      citation: { collection_id: collection, item_id: item.item_id, package_id: item.package_id, chunk_id: expect.stringMatching(/^chk_\d{6}$/), locator: 'heading=Island guide > Ferry > Winter' },
    });
    expect(answer.indexing).toEqual({ indexed: 1, total: 1, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 });
  });

  it('answers a failed item as an item, not an error: its error says why', { timeout: 2 * PROCESSING.timeoutMs }, async () => {
    const queued = await addCollectionItem(ai, collection, { text: '\u0000\u0001\u0002 binary', filename: 'blob.bin', content_type: 'application/octet-stream' });
    const item = await waitForItem(ai, collection, queued.item_id, PROCESSING);
    expect(item).toMatchObject({ status: 'failed', error: { code: 'unsupported_type', message: expect.any(String) } });
  });

  it('replays an add sent again with the same operation id', { timeout: 2 * PROCESSING.timeoutMs }, async () => {
    const operationId = `add-${randomUUID()}`;
    const first = await addCollectionItem(ai, collection, { text: 'Lighthouses guide ships.', filename: 'light.txt' }, { operationId });
    const again = await addCollectionItem(ai, collection, { text: 'Lighthouses guide ships.', filename: 'light.txt' }, { operationId });
    expect(again.item_id).toBe(first.item_id);
    await waitForItem(ai, collection, first.item_id, PROCESSING);
  });

  it('throws the platform’s codes: an unknown upload, an unknown collection', async () => {
    expect(await thrown(addCollectionItem(ai, collection, { upload_id: 'never-uploaded-1' }))).toMatchObject({ status: 404, code: 'upload_not_found' });
    expect(await thrown(queryCollection(ai, 'col_00000000000000000000000000000000', { query: 'x' }))).toMatchObject({ status: 404, code: 'collection_not_found' });
    expect(await thrown(waitForItem(ai, collection, 'itm_00000000000000000000000000000000'))).toMatchObject({ status: 404, code: 'item_not_found' });
  });
});

describe('the vector database through the helpers', () => {
  it('ingests passages (reporting what it skipped), queries them by meaning with a filter, and deletes a document', async () => {
    const ingested = await vectorIngest(ai, {
      scope: 'shared',
      documents: [
        { id: 'faq-refunds', text: 'Refunds reach your card within five days.', document_id: 'faq-refunds', metadata: { kind: 'faq', tag: ['billing'] } },
        { id: 'faq-shipping', text: 'Parcels ship from the harbour warehouse every morning.', document_id: 'faq-shipping', metadata: { kind: 'faq', tag: ['shipping'] } },
        { id: 'bad', text: 'Nested metadata is not flat.', metadata: { kind: { nested: true } } },
      ],
    });
    expect(ingested).toEqual({ ingested: 2, skipped: [{ index: 2, id: 'bad', reason: 'invalid_metadata', param: 'documents.2.metadata.kind', message: expect.any(String) }] });

    const found = await vectorQuery(ai, { mode: 'shared', query: 'when do refunds reach my card?', top_k: 1 });
    expect(found.matches).toEqual([{ id: 'faq-refunds', score: expect.any(Number), text: 'Refunds reach your card within five days.', metadata: { kind: 'faq', tag: ['billing'] }, scope: 'shared' }]);
    expect(found.retrieval).toEqual({ mode: 'vector', reranked: false, profile: null, outcome: 'none' });

    const filtered = await vectorQuery(ai, { mode: 'shared', query: 'when do refunds reach my card?', top_k: 5, filter: { tag: { $in: ['shipping'] } } });
    expect(filtered.matches.map((m) => m.id)).toEqual(['faq-shipping']);

    expect(await deleteVectorDocument(ai, 'faq-refunds', 'shared')).toEqual({ document_id: 'faq-refunds', generation: 1, deleted: 1 });
    const after = await vectorQuery(ai, { mode: 'shared', query: 'when do refunds reach my card?', top_k: 5 });
    expect(after.matches.map((m) => m.id)).toEqual(['faq-shipping']);
  });

  it('throws invalid_field naming the parameter, and document_not_found', async () => {
    expect(await thrown(vectorQuery(ai, { mode: 'shared', query: 'x', top_k: 0 }))).toMatchObject({ status: 400, code: 'invalid_field', param: 'top_k' });
    expect(await thrown(deleteVectorDocument(ai, 'never-ingested', 'shared'))).toMatchObject({ status: 404, code: 'document_not_found' });
  });
});
