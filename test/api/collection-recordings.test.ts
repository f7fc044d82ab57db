/**
 * Recordings as collection items through the local server (docs/ai/collections.md, "Recordings";
 * docs/decisions/knowledge-media.md): the organization's default transcription route points at the
 * fake transcriber; recordings ffmpeg makes (an MP4 video, a WAV) are uploaded, added to a cloud
 * collection, processed by the local queue's consumer, and queries cite the time range
 * (`t=HH:MM:SS-HH:MM:SS`) of the fake's segments, joined into sections of at most 60 s. An upstream
 * that keeps failing: the item is tried MAX_ATTEMPTS times, then `failed` with `upstream_error`, and
 * another item of the collection is done. No transcription route: `unsupported_type`. A recording
 * uploaded in parts, stopped half-way and resumed with only the missing parts, becomes an item.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startFakeTranscriber, type FakeTranscriber } from '../helpers/fake-transcriber.js';
import { addItem, call, createCollection, op, post, query, settledCollection, settledItem, sha256, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { recordingFile } from '../helpers/knowledge-files.js';
import { waitFor } from '../helpers/wait.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { MAX_ATTEMPTS, processItem } from '../../lambdas/knowledge/processing.js';
import { useSettings } from '../../lambdas/shared/settings.js';

let p: TestPlatform;
let embedder: FakeEmbedder;
let transcriber: FakeTranscriber;
let c: Client;
let org: string;
let routes: ModelRoutes;

const WHISPER = { id: 'whisper', endpoint: '/v1/audio/transcriptions', provider: 'openai-compatible', upstream_model: 'whisper-1', timeout_ms: 20_000 } as const;

beforeAll(async () => {
  // Route changes reach processing at once (they are cached a second otherwise).
  useSettings({ modelRoutesCacheMs: 0 });
  p = await startTestPlatform();
  embedder = await startFakeEmbedder();
  transcriber = await startFakeTranscriber();
  org = p.credentials.organization_id;
  c = { url: p.urls.ai, key: p.credentials.secret_key };
  routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
  await routes.set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 5_000, default: true });
  await routes.set(org, { ...WHISPER, base_url: transcriber.baseUrl, default: true });
  await createVectorDatabase(p.engine, p.credentials.workspace_id, 'emb');
}, 60_000);

afterAll(async () => {
  await transcriber?.close();
  await embedder?.close();
  await p?.close();
  useSettings();
});

/** The match of `itemId` in a query's answer (top_k 20), or undefined. */
async function matchOf(col: string, text: string, itemId: string) {
  const r = await query(c, col, { query: text, top_k: 20 });
  expect(r.status, r.text).toBe(200);
  return r.body.matches.filter((m: any) => m.citation.item_id === itemId);
}

const secondsOf = (t: string) => t.split(':').reduce((s, part) => s * 60 + Number(part), 0);

describe('recordings in a cloud collection', () => {
  it('an MP4 video: segments joined into sections of at most 60 s, each cited by its time range', async () => {
    const col = await createCollection(c, 'cloud', 'Tour');
    // 70 s; the script's segments: three within the first minute, one after it.
    transcriber.mode = 'script';
    transcriber.script = () => ({
      text: 'x',
      duration: 70,
      segments: [
        { id: 0, start: 0, end: 20, text: 'The harbour lighthouse keepers' },
        { id: 1, start: 20, end: 41, text: 'trim the lamp every evening.' },
        { id: 2, start: 41, end: 58, text: 'Ships pass the lighthouse at night.' },
        { id: 3, start: 62, end: 70, text: 'The volcano erupted in spring.' },
      ],
    });
    try {
      const video = await recordingFile({ seconds: 70 });
      const added = await addItem(c, col, { upload_id: await uploadFile(c, video, 'tour.mp4', 'video/mp4') });
      expect(added.status, added.text).toBe(202);
      const item = await settledItem(c, col, added.body.item_id, 60_000);
      expect(item).toMatchObject({ status: 'done', error: null, chunk_count: 2 });
      const sent = transcriber.requests.at(-1)!;
      expect(sent.fields.model).toBe('whisper-1');
      expect(sent.file?.channels).toBe(1);

      const [lighthouse] = await matchOf(col, 'lighthouse keepers trim the lamp', item.item_id);
      expect(lighthouse).toMatchObject({ text: 'The harbour lighthouse keepers trim the lamp every evening. Ships pass the lighthouse at night.', citation: { collection_id: col, item_id: item.item_id, package_id: item.package_id, locator: 't=00:00:00-00:00:58' } });
      const hits = await matchOf(col, 'volcano erupted in spring', item.item_id);
      expect(hits[0]).toMatchObject({ text: 'The volcano erupted in spring.', citation: { locator: 't=00:01:02-00:01:10' } });
      expect(new Set(hits.map((m: any) => m.citation.chunk_id)).size).toBe(hits.length);
    } finally {
      transcriber.mode = 'answer';
    }
  }, 90_000);

  it("a WAV recording: the fake's segments every 2 s make one section, cited t=00:00:00-00:00:04", async () => {
    const col = await createCollection(c, 'cloud');
    transcriber.segmentSeconds = 2;
    const wav = await recordingFile({ seconds: 4, container: 'wav' });
    const added = await addItem(c, col, { upload_id: await uploadFile(c, wav, 'tone.wav', 'audio/wav') });
    const item = await settledItem(c, col, added.body.item_id, 30_000);
    expect(item).toMatchObject({ status: 'done', chunk_count: 1 });
    const chunks = await call(c, 'GET', `/v1/collections/${col}/items/${item.item_id}/chunks`);
    expect(chunks.body.data.map((ch: any) => ch.locator)).toEqual(['t=00:00:00-00:00:04']);
    // The fake says where each of its segments is: the first two, in order (a last one of a few ms may follow: the encoder's padding).
    expect(chunks.body.data[0].text).toMatch(/^\S+ 0\.0-2\.0 \S+ 2\.0-4\.0/);
    const [hit] = await matchOf(col, chunks.body.data[0].text, item.item_id);
    expect(hit.citation).toMatchObject({ item_id: item.item_id, chunk_id: chunks.body.data[0].chunk_id, locator: 't=00:00:00-00:00:04' });
  }, 60_000);

  it(`an upstream that keeps failing: the item is tried ${MAX_ATTEMPTS} times, then failed with upstream_error; the other items are done`, async () => {
    const col = await createCollection(c, 'cloud');
    const wav = await recordingFile({ seconds: 4, container: 'wav' });
    const upload = await uploadFile(c, wav, 'broken.wav', 'audio/wav');
    const before = transcriber.requests.length;
    transcriber.mode = 'fail';
    try {
      const bad = (await addItem(c, col, { upload_id: upload })).body.item_id as string;
      const good = (await addItem(c, col, { text: 'Gannets dive for fish off the northern cape.', filename: 'gannets.txt' })).body.item_id as string;
      // The first attempt (the queue's consumer) fails and queues the item again, to be sent after 10 s.
      await waitFor('the first attempt to fail', async () => transcriber.requests.length > before && (await call(c, 'GET', `/v1/collections/${col}/items/${bad}`)).body.status === 'queued', 20_000);
      expect((await call(c, 'GET', `/v1/collections/${col}/items/${bad}`)).body).toMatchObject({ status: 'queued', error: null, package_id: null });
      // The later attempts without the 10 s and 20 s waits: processed now, as the delayed message would be.
      const message = { org, workspace: p.credentials.workspace_id, collection: col, item: bad };
      const outcomes: string[] = [];
      for (let i = 0; i < 10; i++) {
        const outcome = await processItem(p.engine, message);
        outcomes.push(outcome);
        if (outcome === 'failed' || outcome === 'gone') break;
        if (outcome === 'busy') await new Promise((r) => setTimeout(r, 200));
      }
      expect(outcomes.filter((o) => o === 'retry' || o === 'failed')).toEqual([...Array(MAX_ATTEMPTS - 2).fill('retry'), 'failed']);
      expect(transcriber.requests.length - before).toBe(MAX_ATTEMPTS);
      const failed = await settledItem(c, col, bad);
      expect(failed).toMatchObject({ status: 'failed', package_id: null, chunk_count: null, error: { code: 'upstream_error', message: expect.stringContaining(`after ${MAX_ATTEMPTS} attempts`) } });
      // The upstream's body (it names a key) is not shown.
      expect(failed.error.message).not.toContain('sk-secret');
      expect(await settledItem(c, col, good)).toMatchObject({ status: 'done' });
      const settled = await settledCollection(c, col);
      expect(settled).toMatchObject({ status: 'partial', counts: { total: 2, queued: 0, processing: 0, done: 1, failed: 1 } });
      const r = await query(c, col, { query: 'gannets dive' });
      expect(r.body.matches.map((m: any) => m.citation.item_id)).toEqual([good]);
      expect(r.body.indexing).toEqual({ indexed: 1, total: 2, complete: false, searchable: true, skipped_items: 1, skipped_chunks: 0 });
    } finally {
      transcriber.mode = 'answer';
    }
    // The delayed message still comes (10 s after the first attempt): it finds the item final and leaves it.
  }, 60_000);

  it('no transcription route: the recording fails with unsupported_type, saying how to configure one', async () => {
    const col = await createCollection(c, 'cloud');
    await routes.set(org, { ...WHISPER, base_url: transcriber.baseUrl, default: false });
    try {
      const wav = await recordingFile({ seconds: 2, container: 'wav' });
      const added = await addItem(c, col, { upload_id: await uploadFile(c, wav, 'tone.wav', 'audio/wav') });
      const item = await settledItem(c, col, added.body.item_id);
      expect(item).toMatchObject({ status: 'failed', error: { code: 'unsupported_type', message: expect.stringContaining('/v1/audio/transcriptions') } });
    } finally {
      await routes.set(org, { ...WHISPER, base_url: transcriber.baseUrl, default: true });
    }
  }, 30_000);
});

describe('a resumed upload feeding an item', () => {
  it('stops after its first part, sends only the missing parts GET names, completes, and the recording is processed', async () => {
    const col = await createCollection(c, 'cloud');
    transcriber.segmentSeconds = 10;
    // 130 s of 16-bit mono WAV (about 11 MB): three parts of 5 MiB at most.
    const wav = await recordingFile({ seconds: 130, container: 'wav' });
    const id = op();
    const started = await post(c, '/v1/uploads', { filename: 'long.wav', content_type: 'audio/wav', size: wav.length, sha256: sha256(wav) }, id);
    expect(started.status, started.text).toBe(201);
    const { part_size: partSize, parts } = started.body as { part_size: number; parts: { number: number; url: string }[] };
    expect(parts.length).toBe(3);
    const put = async (part: { number: number; url: string }) => {
      const res = await fetch(part.url.startsWith('http') ? part.url : `${c.url}${part.url}`, { method: 'PUT', body: wav.subarray((part.number - 1) * partSize, part.number * partSize), headers: { authorization: `Bearer ${c.key}`, 'x-operation-id': op() } });
      expect(res.status, await res.text()).toBe(200);
    };
    await put(parts[0]);
    // The client stops here; later it asks what arrived.
    const resumed = await call(c, 'GET', `/v1/uploads/${id}`);
    expect(resumed.body).toMatchObject({ status: 'pending', parts_received: [1] });
    const missing = resumed.body.parts as { number: number; url: string }[];
    expect(missing.map((m) => m.number)).toEqual([2, 3]);
    for (const part of missing) await put(part);
    const done = await post(c, `/v1/uploads/${id}/complete`, {});
    expect([done.status, done.body.status, done.body.parts_received]).toEqual([200, 'completed', [1, 2, 3]]);

    const added = await addItem(c, col, { upload_id: id });
    expect(added.body).toMatchObject({ upload_id: id, filename: 'long.wav', status: 'queued' });
    const item = await settledItem(c, col, added.body.item_id, 60_000);
    expect(item).toMatchObject({ status: 'done', error: null, chunk_count: 3 });
    const chunks = await call(c, 'GET', `/v1/collections/${col}/items/${item.item_id}/chunks`);
    const locators: string[] = chunks.body.data.map((ch: any) => ch.locator);
    expect(locators).toEqual(['t=00:00:00-00:01:00', 't=00:01:00-00:02:00', 't=00:02:00-00:02:10']);
    for (const l of locators) {
      const [from, to] = l.slice(2).split('-').map(secondsOf);
      expect(to - from).toBeLessThanOrEqual(60);
    }
  }, 90_000);
});
