/**
 * The S3 Vectors adapter (lambdas/engine/aws/vectors.ts) on an in-memory S3 Vectors behind
 * aws-sdk-client-mock (test/helpers/s3vectors-mock.ts, which holds the service's limits): the shared
 * contract, then what only this adapter does: the requests it sends, paging, the limits it checks
 * before sending, retries under throttling, and how errors come out.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  AccessDeniedException,
  CreateIndexCommand,
  GetIndexCommand,
  PutVectorsCommand,
  QueryVectorsCommand,
  S3VectorsClient,
  ServiceUnavailableException,
} from '@aws-sdk/client-s3vectors';
import { VECTOR_BATCH_MAX, type VectorEntry } from '../../lambdas/engine/ports.js';
import { EngineUnavailableError } from '../../lambdas/engine/errors.js';
import { PAYLOAD_KEY, RETRY, S3VectorIndex, s3Filter } from '../../lambdas/engine/aws/vectors.js';
import { mockS3Vectors, throttled, type S3VectorsMock } from '../helpers/s3vectors-mock.js';
import { seededRandom, vectorIndexContract } from './vector-index-contract.js';

const BUCKET = 'vectors-test';
const newClient = () => new S3VectorsClient({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' } });

vectorIndexContract('S3 Vectors (aws-sdk-client-mock)', async () => {
  const client = newClient();
  const mock = mockS3Vectors(client, { buckets: [BUCKET] });
  return { vectors: new S3VectorIndex(client, BUCKET), cleanup: async () => mock.restore() };
});

const vector = (random: () => number, dims: number) => Float32Array.from({ length: dims }, () => random() * 2 - 1);
const entry = (key: string, v: Float32Array, filterable: VectorEntry['filterable'] = {}, payload = `{"id":"${key}"}`): VectorEntry => ({ key, vector: v, filterable, payload });

describe('S3VectorIndex', () => {
  let mock: S3VectorsMock;
  let vectors: S3VectorIndex;
  let time: number;
  const slept: number[] = [];
  const r = seededRandom(99);

  beforeEach(() => {
    time = 1_000_000;
    slept.length = 0;
    const client = newClient();
    mock = mockS3Vectors(client, { buckets: [BUCKET], now: () => time });
    // Pauses pass on the mock's clock, not in real time.
    vectors = new S3VectorIndex(client, BUCKET, { sleep: async (ms) => void (slept.push(ms), (time += ms)) });
  });
  afterEach(() => mock.restore());

  const sent = (command: string) => mock.calls().filter((c) => c.command === command).map((c) => c.input);

  describe('list', () => {
    it('asks ListVectors for metadata, drops the payload key, and follows nextToken as the cursor', async () => {
      await vectors.createIndex('ws-list', 3);
      await vectors.put('ws-list', ['a', 'b', 'c'].map((k) => entry(k, vector(r, 3), { scope: 'col.x', tag: ['t'] }, `{"text":"${k}"}`)));
      const first = await vectors.list('ws-list', { limit: 2 });
      expect(first.entries).toEqual([{ key: 'a', filterable: { scope: 'col.x', tag: ['t'] } }, { key: 'b', filterable: { scope: 'col.x', tag: ['t'] } }]);
      const second = await vectors.list('ws-list', { limit: 2, cursor: first.cursor });
      expect(second).toEqual({ entries: [{ key: 'c', filterable: { scope: 'col.x', tag: ['t'] } }] });
      expect(sent('ListVectors')).toEqual([
        { vectorBucketName: BUCKET, indexName: 'ws-list', maxResults: 2, returnMetadata: true },
        { vectorBucketName: BUCKET, indexName: 'ws-list', maxResults: 2, returnMetadata: true, nextToken: first.cursor },
      ]);
    });

    it('starts again from the first page when S3 Vectors refuses the cursor (expired); a missing index lists nothing', async () => {
      await vectors.createIndex('ws-list', 3);
      await vectors.put('ws-list', ['a', 'b', 'c'].map((k) => entry(k, vector(r, 3))));
      const first = await vectors.list('ws-list', { limit: 2 });
      mock.forgetListTokens();
      expect((await vectors.list('ws-list', { limit: 2, cursor: first.cursor })).entries.map((e) => e.key)).toEqual(['a', 'b']);
      expect(await vectors.list('ws-none', { limit: 2 })).toEqual({ entries: [] });
      await expect(vectors.list('ws-list', { limit: 1001 })).rejects.toThrow('1 to 1000');
    });
  });

  describe('createIndex', () => {
    it('creates a float32 cosine index whose payload key alone is non-filterable', async () => {
      await vectors.createIndex('ws-one', 384);
      expect(sent('CreateIndex')).toEqual([
        {
          vectorBucketName: BUCKET,
          indexName: 'ws-one',
          dataType: 'float32',
          dimension: 384,
          distanceMetric: 'cosine',
          metadataConfiguration: { nonFilterableMetadataKeys: [PAYLOAD_KEY] },
        },
      ]);
      expect(mock.indexes().get('ws-one')).toMatchObject({ dimension: 384, distanceMetric: 'cosine', nonFilterable: [PAYLOAD_KEY] });
    });

    it('takes an existing index of the same dimensions (ConflictException, then GetIndex)', async () => {
      await vectors.createIndex('ws-one', 8);
      await vectors.createIndex('ws-one', 8);
      expect(mock.calls().map((c) => c.command)).toEqual(['CreateIndex', 'CreateIndex', 'GetIndex']);
      await expect(vectors.createIndex('ws-one', 16)).rejects.toThrow('vector index ws-one exists with 8 dimensions, not 16');
    });

    it('refuses an existing index made otherwise (another metric, or the payload filterable)', async () => {
      const client = newClient();
      const other = mockS3Vectors(client, { buckets: [BUCKET] });
      await client.send(new CreateIndexCommand({ vectorBucketName: BUCKET, indexName: 'made-by-hand', dataType: 'float32', dimension: 8, distanceMetric: 'cosine' }));
      await expect(new S3VectorIndex(client, BUCKET).createIndex('made-by-hand', 8)).rejects.toThrow(/exists with another configuration/);
      other.restore();
    });

    it('tries again while throttled, and a retried create that finds its own index succeeds', async () => {
      mock.failNext('CreateIndex', throttled(), 2);
      await vectors.createIndex('ws-one', 8);
      expect(sent('CreateIndex')).toHaveLength(3);
      expect(slept).toHaveLength(2);
    });
  });

  describe('deleteIndex', () => {
    it('deletes the index; a missing one is not an error', async () => {
      await vectors.createIndex('ws-one', 8);
      await vectors.deleteIndex('ws-one');
      await vectors.deleteIndex('ws-one');
      expect(sent('DeleteIndex')).toEqual([
        { vectorBucketName: BUCKET, indexName: 'ws-one' },
        { vectorBucketName: BUCKET, indexName: 'ws-one' },
      ]);
      expect(mock.indexes().has('ws-one')).toBe(false);
    });

    it('passes other errors through (access denied is a configuration error, not absence)', async () => {
      mock.failNext('DeleteIndex', new AccessDeniedException({ message: 'denied', $metadata: { httpStatusCode: 403 } }));
      await expect(vectors.deleteIndex('ws-one')).rejects.toBeInstanceOf(AccessDeniedException);
    });
  });

  describe('put and delete', () => {
    beforeEach(() => vectors.createIndex('ws-one', 4));

    it('sends one PutVectors with float32 data and the filterable metadata beside the payload', async () => {
      const v = Float32Array.from([0.5, -0.25, 1, 0]);
      await vectors.put('ws-one', [entry('v1', v, { scope: 'shared', tag: ['a', 'b'], created_at: 3 }, '{"id":"p1"}')]);
      expect(sent('PutVectors')).toEqual([
        {
          vectorBucketName: BUCKET,
          indexName: 'ws-one',
          vectors: [{ key: 'v1', data: { float32: [0.5, -0.25, 1, 0] }, metadata: { scope: 'shared', tag: ['a', 'b'], created_at: 3, [PAYLOAD_KEY]: '{"id":"p1"}' } }],
        },
      ]);
    });

    it('sends nothing for an empty put or delete, and deletes by keys', async () => {
      await vectors.put('ws-one', []);
      await vectors.delete('ws-one', []);
      await vectors.delete('ws-one', ['a', 'b']);
      expect(mock.calls().map((c) => c.command)).toEqual(['CreateIndex', 'DeleteVectors']);
      expect(sent('DeleteVectors')).toEqual([{ vectorBucketName: BUCKET, indexName: 'ws-one', keys: ['a', 'b'] }]);
    });

    const refusedBeforeSending = async (entries: VectorEntry[], message: RegExp) => {
      await expect(vectors.put('ws-one', entries)).rejects.toThrow(message);
      expect(sent('PutVectors')).toEqual([]);
    };
    const v = () => vector(r, 4);

    it(`refuses more than ${VECTOR_BATCH_MAX} entries or keys a call`, async () => {
      const many = Array.from({ length: VECTOR_BATCH_MAX + 1 }, (_, i) => entry(`k${i}`, v()));
      await refusedBeforeSending(many, /at most 500 entries/);
      await expect(vectors.delete('ws-one', many.map((e) => e.key))).rejects.toThrow(/at most 500 keys/);
      expect(sent('DeleteVectors')).toEqual([]);
    });

    it('refuses filterable metadata over 2 KiB as JSON, naming the limit', async () => {
      await refusedBeforeSending([entry('k', v(), { category: 'x'.repeat(2040) })], /filterable metadata is 2055 bytes as JSON, over the limit of 2048/);
      // Multi-byte characters count by their UTF-8 bytes.
      await refusedBeforeSending([entry('k', v(), { category: 'é'.repeat(1020) })], /over the limit of 2048/);
      await vectors.put('ws-one', [entry('k', v(), { category: 'x'.repeat(2048 - '{"category":""}'.length) })]);
    });

    it('refuses more than 40 filterable keys, the payload key among them, and values the port does not have', async () => {
      const keys = Object.fromEntries(Array.from({ length: 41 }, (_, i) => [`k${i}`, 1]));
      await refusedBeforeSending([entry('k', v(), keys)], /41 filterable metadata keys, over the limit of 40/);
      await refusedBeforeSending([entry('k', v(), { [PAYLOAD_KEY]: 'x' })], /payload's metadata key/);
      await refusedBeforeSending([entry('k', v(), { n: Number.NaN })], /not a string, finite number/);
      await refusedBeforeSending([entry('k', v(), { tags: [1, 2] as unknown as string[] })], /not a string, finite number/);
    });

    it('refuses a payload over 32 KiB as a JSON string, its escapes counted as S3 Vectors counts them', async () => {
      await refusedBeforeSending([entry('k', v(), {}, 'x'.repeat(32 * 1024 - 1))], /payload is 32769 bytes as a JSON string, over the limit of 32768/);
      // 16 KiB of quotes is 32 KiB once escaped in the JSON S3 Vectors measures.
      await refusedBeforeSending([entry('k', v(), {}, '"'.repeat(16 * 1024))], /payload is 32770 bytes as a JSON string/);
      await vectors.put('ws-one', [entry('k', v(), {}, 'x'.repeat(32 * 1024 - 2))]);
    });

    it('refuses a key over 1,024 bytes and a component that is not finite', async () => {
      await refusedBeforeSending([entry('é'.repeat(513), v())], /1 to 1024 bytes, not 1026/);
      await refusedBeforeSending([entry('k', Float32Array.from([1, Number.POSITIVE_INFINITY, 0, 0]))], /not finite/);
    });

    it('a put into a missing index, or of the wrong dimensions, is the service error, not retried', async () => {
      await expect(vectors.put('ws-none', [entry('k', v())])).rejects.toThrow(/could not be found/);
      await expect(vectors.put('ws-one', [entry('k', vector(r, 5))])).rejects.toThrow(/dimension 5/);
      expect(sent('PutVectors')).toHaveLength(2);
      expect(slept).toEqual([]);
    });

    it('keeps under 2,500 vectors a second per index: a throttled put waits and goes through', async () => {
      const batches = Array.from({ length: 7 }, (_, b) => Array.from({ length: VECTOR_BATCH_MAX }, (_, i) => entry(`b${b}-${i}`, v())));
      for (const batch of batches) await vectors.put('ws-one', batch);
      expect(mock.indexes().get('ws-one')!.vectors.size).toBe(7 * VECTOR_BATCH_MAX);
      // The sixth batch met the limit (5 x 500 = 2,500 in the second): retried after pauses, never lost.
      expect(sent('PutVectors').length).toBeGreaterThan(7);
      expect(slept.length).toBeGreaterThan(0);
      for (const ms of slept) expect(ms).toBeLessThanOrEqual(RETRY.maxPauseMs);
    });

    it('tries 503s again; gives up after its attempts with EngineUnavailableError', async () => {
      mock.failNext('PutVectors', new ServiceUnavailableException({ message: 'busy', $metadata: { httpStatusCode: 503 } }), 1);
      await vectors.put('ws-one', [entry('k', v())]);
      expect(sent('PutVectors')).toHaveLength(2);
      mock.failNext('DeleteVectors', throttled(), RETRY.attempts);
      await expect(vectors.delete('ws-one', ['k'])).rejects.toBeInstanceOf(EngineUnavailableError);
      expect(sent('DeleteVectors')).toHaveLength(RETRY.attempts);
    });
  });

  describe('query', () => {
    const dims = 4;
    beforeEach(() => vectors.createIndex('ws-one', dims));

    it('asks for metadata and distances, with the filter in S3 Vectors language', async () => {
      await vectors.put('ws-one', [entry('a', vector(r, dims), { scope: 'shared', tag: ['x', 'y'] })]);
      const query = vector(r, dims);
      await vectors.query('ws-one', { vector: query, topK: 5, filter: { scope: 'shared', tag: { $in: ['y', 'z'] } } });
      await vectors.query('ws-one', { vector: query, topK: 5, filter: { scope: 'shared' } });
      await vectors.query('ws-one', { vector: query, topK: 5 });
      const [both, one, none] = sent('QueryVectors');
      expect(both).toEqual({
        vectorBucketName: BUCKET,
        indexName: 'ws-one',
        topK: 5,
        queryVector: { float32: Array.from(query) },
        filter: { $and: [{ scope: { $eq: 'shared' } }, { tag: { $in: ['y', 'z'] } }] },
        returnMetadata: true,
        returnDistance: true,
      });
      expect(one.filter).toEqual({ scope: { $eq: 'shared' } });
      expect(none).not.toHaveProperty('filter');
    });

    it('scores 1 - the cosine distance S3 Vectors returns', async () => {
      await vectors.put('ws-one', [
        entry('same', Float32Array.from([2, 0, 0, 0])),
        entry('orthogonal', Float32Array.from([0, 3, 0, 0])),
        entry('opposite', Float32Array.from([-1, 0, 0, 0])),
      ]);
      const hits = await vectors.query('ws-one', { vector: Float32Array.from([1, 0, 0, 0]), topK: 3 });
      expect(hits.map((h) => h.key)).toEqual(['same', 'orthogonal', 'opposite']);
      expect(hits.map((h) => h.score)).toEqual([1, 0, -1].map((s) => expect.closeTo(s, 6)));
      expect(hits[0].payload).toBe('{"id":"same"}');
      // Whatever the service answers, the score is 1 - distance.
      const client = newClient();
      const answers = mockClient(client);
      answers.on(QueryVectorsCommand).resolves({ vectors: [{ key: 'k', distance: 0.25, metadata: { [PAYLOAD_KEY]: 'p' } }], distanceMetric: 'cosine' });
      expect(await new S3VectorIndex(client, BUCKET).query('ws-one', { vector: Float32Array.from([1, 0, 0, 0]), topK: 1 })).toEqual([{ key: 'k', score: 0.75, payload: 'p' }]);
      answers.restore();
    });

    it('follows nextToken until topK hits, in order', async () => {
      const entries = Array.from({ length: 150 }, (_, i) => entry(`k${i}`, vector(r, dims)));
      await vectors.put('ws-one', entries);
      const hits = await vectors.query('ws-one', { vector: vector(r, dims), topK: 100 });
      expect(hits).toHaveLength(100);
      const pages = sent('QueryVectors');
      expect(pages).toHaveLength(4); // pages of 30 in the mock
      expect(pages[0].nextToken).toBeUndefined();
      for (const page of pages.slice(1)) expect(page.nextToken).toEqual(expect.any(String));
      for (let i = 1; i < hits.length; i++) expect(hits[i - 1].score).toBeGreaterThanOrEqual(hits[i].score);
    });

    it('refuses topK outside 1..100 and a $in of 0 or over 20 values before sending', async () => {
      const query = vector(r, dims);
      await expect(vectors.query('ws-one', { vector: query, topK: 0 })).rejects.toThrow(/topK/);
      await expect(vectors.query('ws-one', { vector: query, topK: 101 })).rejects.toThrow(/topK/);
      await expect(vectors.query('ws-one', { vector: query, topK: 5, filter: { tag: { $in: [] } } })).rejects.toThrow(/\$in takes 1 to 20/);
      const many = Array.from({ length: 21 }, (_, i) => `t${i}`);
      await expect(vectors.query('ws-one', { vector: query, topK: 5, filter: { tag: { $in: many } } })).rejects.toThrow(/\$in takes 1 to 20/);
      await expect(vectors.query('ws-one', { vector: query, topK: 5, filter: { [PAYLOAD_KEY]: 'x' } })).rejects.toThrow(/cannot test/);
      expect(sent('QueryVectors')).toEqual([]);
    });

    it('a query of a missing index is the service error', async () => {
      await expect(vectors.query('ws-none', { vector: vector(r, dims), topK: 5 })).rejects.toThrow(/could not be found/);
    });
  });

  it('s3Filter: no filter and an empty one send none', () => {
    expect(s3Filter(undefined)).toBeUndefined();
    expect(s3Filter({})).toBeUndefined();
    expect(s3Filter({ created_at: true })).toEqual({ created_at: { $eq: true } });
  });

  describe('the mock is the service', () => {
    let client: S3VectorsClient;
    let other: S3VectorsMock;
    const base = { vectorBucketName: BUCKET, indexName: 'raw' };
    const put = (vectors: unknown[]) => client.send(new PutVectorsCommand({ ...base, vectors: vectors as never }));
    const refused = (call: Promise<unknown>, message: RegExp) => expect(call).rejects.toMatchObject({ name: 'ValidationException', message: expect.stringMatching(message) });
    beforeEach(async () => {
      client = newClient();
      other = mockS3Vectors(client, { buckets: [BUCKET] });
      await client.send(new CreateIndexCommand({ ...base, dataType: 'float32', dimension: 2, distanceMetric: 'cosine', metadataConfiguration: { nonFilterableMetadataKeys: ['payload'] } }));
    });
    afterEach(() => other.restore());

    it('GetIndex of a missing index is NotFoundException', async () => {
      await expect(client.send(new GetIndexCommand({ vectorBucketName: BUCKET, indexName: 'nope' }))).rejects.toMatchObject({ name: 'NotFoundException' });
    });

    it('refuses what S3 Vectors refuses: over 500 vectors, a zero vector under cosine, filterable metadata over 2 KiB, over 50 keys', async () => {
      const v = (key: string, metadata?: object) => ({ key, data: { float32: [1, 0] }, metadata });
      await refused(put(Array.from({ length: 501 }, (_, i) => v(`k${i}`))), /1 to 500/);
      await refused(put([{ key: 'z', data: { float32: [0, 0] } }]), /zero vectors/);
      await refused(put([v('k', { category: 'x'.repeat(2048) })]), /filterable metadata is over 2048/);
      // The same bytes in the non-filterable key are fine.
      await put([v('k', { payload: 'x'.repeat(2048) })]);
      await refused(put([v('k', Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`m${i}`, i])))]), /51 metadata keys/);
    });

    it('queries: topK 1 to 100, no filter on a non-filterable key, lists matched by any element', async () => {
      await put([{ key: 'a', data: { float32: [1, 0] }, metadata: { tag: ['x', 'y'], payload: 'p' } }]);
      const query = (input: object) => client.send(new QueryVectorsCommand({ ...base, queryVector: { float32: [1, 0] }, topK: 5, ...input }));
      await refused(query({ topK: 101 }), /topK/);
      await refused(query({ filter: { payload: 'p' } }), /non-filterable/);
      await refused(query({ filter: { tag: { $in: [] } } }), /\$in takes a non-empty array/);
      expect((await query({ filter: { tag: { $eq: 'y' } } })).vectors).toEqual([{ key: 'a' }]);
      expect((await query({ filter: { tag: { $in: ['z', 'x'] } }, returnDistance: true })).vectors).toEqual([{ key: 'a', distance: expect.closeTo(0, 6) }]);
      expect((await query({ filter: { $and: [{ tag: 'x' }, { tag: { $ne: 'y' } }] } })).vectors).toEqual([]);
    });

    it('throttles past 2,500 vectors a second on one index', async () => {
      const batch = (b: number) => Array.from({ length: 500 }, (_, i) => ({ key: `b${b}-${i}`, data: { float32: [1, i + 1] } }));
      for (let b = 0; b < 5; b++) await put(batch(b));
      await expect(put(batch(5))).rejects.toMatchObject({ name: 'TooManyRequestsException', $metadata: { httpStatusCode: 429 } });
    });
  });
});
