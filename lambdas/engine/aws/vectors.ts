/**
 * VectorIndex on Amazon S3 Vectors: one S3 Vectors index per VectorIndex index, in the vector bucket
 * of the stack (VECTOR_BUCKET_NAME), float32, cosine. An entry's filterable metadata is the vector's
 * filterable metadata; its payload is one non-filterable metadata key (PAYLOAD_KEY), so a query
 * returns it without a second read. The limits S3 Vectors has are checked here first, so an entry it
 * would refuse fails naming the limit before anything is sent (docs/decisions/vector-index-aws.md).
 */
import {
  ConflictException,
  CreateIndexCommand,
  DeleteIndexCommand,
  DeleteVectorsCommand,
  GetIndexCommand,
  PutVectorsCommand,
  QueryVectorsCommand,
  type S3VectorsClient,
} from '@aws-sdk/client-s3vectors';
import { VECTOR_BATCH_MAX, VECTOR_TOP_K_MAX, type VectorEntry, type VectorFilter, type VectorHit, type VectorIndex } from '../ports.js';
import { contentionPauseMs, pause } from '../../shared/backoff.js';
import { classifyAwsError, translateAwsError } from './errors.js';

/** The non-filterable metadata key holding an entry's payload (S3 Vectors allows 10 an index). */
export const PAYLOAD_KEY = 'payload';

/** S3 Vectors' limits an entry meets before it is sent (Amazon S3 User Guide, "Limitations and restrictions"). */
export const S3_VECTORS_ENTRY_LIMITS = {
  keyBytes: 1024,
  /** The port's: 40 filterable keys, plus the payload's, under S3 Vectors' 50 keys a vector. */
  filterableKeys: 40,
  metadataKeys: 50,
  /** Filterable metadata as UTF-8 JSON (S3 Vectors: 2 KB). */
  filterableBytes: 2 * 1024,
  /** The payload's UTF-8 bytes (the port's 32 KiB). */
  payloadBytes: 32 * 1024,
  /** All metadata as UTF-8 JSON, the payload's escapes included (S3 Vectors: 40 KB). */
  metadataBytes: 40 * 1024,
  /** Values a `$in` takes (the port's). */
  inValues: 20,
} as const;

/**
 * Throttling (1,000 write requests and 2,500 vectors a second per index), 429 and 5xx answers are
 * tried again after a random pause that grows with each attempt (full jitter, from about 64 ms to
 * 2 s); after the last, the call fails with EngineUnavailableError (callers answer 503). The client is
 * built without the SDK's own retries (engine/aws/index.ts), so these are the only ones.
 */
export const RETRY = { attempts: 8, firstExponent: 6, maxPauseMs: 2000 } as const;

export interface S3VectorIndexOptions {
  /** Waits between attempts (tests pass one that advances a fake clock). */
  sleep?: (ms: number) => Promise<void>;
}

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

/** S3 Vectors' metadata and filters are JSON documents. */
type Document = null | boolean | number | string | Document[] | { [key: string]: Document };

export class S3VectorIndex implements VectorIndex {
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(
    private readonly client: S3VectorsClient,
    private readonly bucket: string,
    options: S3VectorIndexOptions = {},
  ) {
    this.sleep = options.sleep ?? pause;
  }

  async createIndex(index: string, dimensions: number): Promise<void> {
    try {
      await this.call('CreateIndex', () =>
        this.client.send(
          new CreateIndexCommand({
            vectorBucketName: this.bucket,
            indexName: index,
            dataType: 'float32',
            dimension: dimensions,
            distanceMetric: 'cosine',
            metadataConfiguration: { nonFilterableMetadataKeys: [PAYLOAD_KEY] },
          }),
        ),
      );
    } catch (error) {
      if (!(error instanceof ConflictException)) throw error;
      // Already there (another call made it, or a retry of ours did): the same shape is the same index.
      const { index: existing } = await this.call('GetIndex', () => this.client.send(new GetIndexCommand({ vectorBucketName: this.bucket, indexName: index })));
      if (existing?.dimension !== dimensions) {
        throw new Error(`vector index ${index} exists with ${existing?.dimension} dimensions, not ${dimensions}`);
      }
      if (existing.distanceMetric !== 'cosine' || !existing.metadataConfiguration?.nonFilterableMetadataKeys?.includes(PAYLOAD_KEY)) {
        throw new Error(`vector index ${index} exists with another configuration (metric ${existing.distanceMetric}, non-filterable ${JSON.stringify(existing.metadataConfiguration?.nonFilterableMetadataKeys ?? [])})`);
      }
    }
  }

  async deleteIndex(index: string): Promise<void> {
    try {
      await this.call('DeleteIndex', () => this.client.send(new DeleteIndexCommand({ vectorBucketName: this.bucket, indexName: index })));
    } catch (error) {
      // Gone already (or never made): what a delete wants.
      if (classifyAwsError(error).kind === 'not_found') return;
      throw error;
    }
  }

  async put(index: string, entries: VectorEntry[]): Promise<void> {
    if (entries.length > VECTOR_BATCH_MAX) throw new Error(`a vector put takes at most ${VECTOR_BATCH_MAX} entries, not ${entries.length}`);
    if (!entries.length) return;
    const vectors = entries.map((entry) => ({ key: checkKey(entry.key), data: { float32: vectorValues(entry) }, metadata: metadataOf(entry) }));
    await this.call('PutVectors', () => this.client.send(new PutVectorsCommand({ vectorBucketName: this.bucket, indexName: index, vectors })));
  }

  async delete(index: string, keys: string[]): Promise<void> {
    if (keys.length > VECTOR_BATCH_MAX) throw new Error(`a vector delete takes at most ${VECTOR_BATCH_MAX} keys, not ${keys.length}`);
    if (!keys.length) return;
    for (const key of keys) checkKey(key);
    await this.call('DeleteVectors', () => this.client.send(new DeleteVectorsCommand({ vectorBucketName: this.bucket, indexName: index, keys })));
  }

  async query(index: string, query: { vector: Float32Array; topK: number; filter?: VectorFilter }): Promise<VectorHit[]> {
    const { topK } = query;
    if (!Number.isInteger(topK) || topK < 1 || topK > VECTOR_TOP_K_MAX) throw new Error(`topK must be an integer from 1 to ${VECTOR_TOP_K_MAX}, not ${topK}`);
    const filter = s3Filter(query.filter);
    const queryVector = { float32: finiteValues(query.vector, 'the query vector') };
    const hits: VectorHit[] = [];
    // Results past S3 Vectors' page size come in pages: the same query with each nextToken.
    let nextToken: string | undefined;
    do {
      const page = await this.call('QueryVectors', () =>
        this.client.send(
          new QueryVectorsCommand({
            vectorBucketName: this.bucket,
            indexName: index,
            topK,
            queryVector,
            ...(filter ? { filter } : {}),
            returnMetadata: true,
            returnDistance: true,
            ...(nextToken ? { nextToken } : {}),
          }),
        ),
      );
      for (const v of page.vectors ?? []) {
        if (v.key === undefined || typeof v.distance !== 'number') throw new Error('S3 Vectors QueryVectors returned a vector without its key or distance');
        const payload = (v.metadata as Record<string, unknown> | undefined)?.[PAYLOAD_KEY];
        // S3 Vectors' cosine distance is 1 - cosine similarity; the port promises the similarity.
        hits.push({ key: v.key, score: 1 - v.distance, payload: typeof payload === 'string' ? payload : '' });
      }
      nextToken = page.nextToken || undefined;
    } while (nextToken && hits.length < topK);
    return hits.sort((a, b) => b.score - a.score).slice(0, topK);
  }

  /** One S3 Vectors call, tried again while S3 Vectors is throttling or unavailable; errors translated (./errors.ts). */
  private async call<T>(operation: string, send: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await send();
      } catch (error) {
        if (classifyAwsError(error).kind !== 'unavailable' || attempt >= RETRY.attempts) throw translateAwsError(error, `S3 Vectors ${operation}`);
        await this.sleep(contentionPauseMs(attempt + RETRY.firstExponent - 1, RETRY.maxPauseMs));
      }
    }
  }
}

function checkKey(key: string): string {
  const size = utf8(key);
  if (size < 1 || size > S3_VECTORS_ENTRY_LIMITS.keyBytes) throw new Error(`a vector key is 1 to ${S3_VECTORS_ENTRY_LIMITS.keyBytes} bytes, not ${size}`);
  return key;
}

function finiteValues(vector: Float32Array, what: string): number[] {
  const values = Array.from(vector);
  if (!values.every(Number.isFinite)) throw new Error(`${what} has a component that is not finite`);
  return values;
}

const vectorValues = (entry: VectorEntry) => finiteValues(entry.vector, `vector ${entry.key}`);

/** The entry's metadata as S3 Vectors stores it: its filterable keys and the payload, each limit checked. */
function metadataOf(entry: VectorEntry): Record<string, Document> {
  const L = S3_VECTORS_ENTRY_LIMITS;
  const keys = Object.keys(entry.filterable);
  if (keys.includes(PAYLOAD_KEY)) throw new Error(`vector ${entry.key}: "${PAYLOAD_KEY}" is the payload's metadata key, not a filterable one`);
  if (keys.length > L.filterableKeys) throw new Error(`vector ${entry.key}: ${keys.length} filterable metadata keys, over the limit of ${L.filterableKeys}`);
  for (const [k, v] of Object.entries(entry.filterable)) {
    const ok = typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v)) || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
    if (!ok) throw new Error(`vector ${entry.key}: filterable metadata ${k} is not a string, finite number, boolean or array of strings`);
  }
  const filterableBytes = utf8(JSON.stringify(entry.filterable));
  if (filterableBytes > L.filterableBytes) {
    throw new Error(`vector ${entry.key}: filterable metadata is ${filterableBytes} bytes as JSON, over the limit of ${L.filterableBytes} (S3 Vectors' filterable metadata)`);
  }
  const payloadBytes = utf8(entry.payload);
  if (payloadBytes > L.payloadBytes) throw new Error(`vector ${entry.key}: payload is ${payloadBytes} bytes, over the limit of ${L.payloadBytes}`);
  const metadata = { ...entry.filterable, [PAYLOAD_KEY]: entry.payload };
  const totalBytes = utf8(JSON.stringify(metadata));
  if (totalBytes > L.metadataBytes) throw new Error(`vector ${entry.key}: metadata is ${totalBytes} bytes as JSON, over the limit of ${L.metadataBytes} (S3 Vectors' total metadata)`);
  return metadata;
}

/**
 * The port's filter in S3 Vectors' language: each key's condition as `$eq` or `$in` (both match a
 * list value by any element, as the port wants), all of them under `$and`.
 */
export function s3Filter(filter: VectorFilter | undefined): Record<string, Document> | undefined {
  if (!filter) return undefined;
  const clauses = Object.entries(filter).map(([key, condition]): Record<string, Document> => {
    if (key === PAYLOAD_KEY || key.startsWith('$')) throw new Error(`a vector filter cannot test "${key}"`);
    if (typeof condition === 'object' && condition !== null) {
      const values = (condition as { $in?: unknown }).$in;
      if (!Array.isArray(values) || values.length < 1 || values.length > S3_VECTORS_ENTRY_LIMITS.inValues || Object.keys(condition).length !== 1) {
        throw new Error(`the vector filter on ${key}: $in takes 1 to ${S3_VECTORS_ENTRY_LIMITS.inValues} values`);
      }
      return { [key]: { $in: values } };
    }
    return { [key]: { $eq: condition } };
  });
  if (!clauses.length) return undefined;
  return clauses.length === 1 ? clauses[0] : { $and: clauses };
}
