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
  ListVectorsCommand,
  PutVectorsCommand,
  QueryVectorsCommand,
  type S3VectorsClient,
} from '@aws-sdk/client-s3vectors';
import { VECTOR_BATCH_MAX, VECTOR_LIST_MAX, VECTOR_TOP_K_MAX, type VectorEntry, type VectorFilter, type VectorHit, type VectorIndex, type VectorListed } from '../ports.js';
import { contentionPauseMs, pause } from '../../shared/backoff.js';
import { classifyAwsError, translateAwsError } from './errors.js';
import { VECTOR_LIMITS, checkVectorEntry, checkVectorFilter, checkVectorKey } from '../adapter-kit/vector-checks.js';

/** The non-filterable metadata key holding an entry's payload (S3 Vectors allows 10 an index). */
export const PAYLOAD_KEY = 'payload';

/** S3 Vectors' limits beyond the port's (adapter-kit/vector-checks.ts): all metadata as UTF-8 JSON, the payload's escapes included (40 KB). */
export const S3_VECTORS_ENTRY_LIMITS = { ...VECTOR_LIMITS, metadataKeys: 50, metadataBytes: 40 * 1024 } as const;

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
    const vectors = entries.map((entry) => ({ key: checkVectorKey(entry.key), data: { float32: vectorValues(entry) }, metadata: metadataOf(entry) }));
    await this.call('PutVectors', () => this.client.send(new PutVectorsCommand({ vectorBucketName: this.bucket, indexName: index, vectors })));
  }

  async delete(index: string, keys: string[]): Promise<void> {
    if (keys.length > VECTOR_BATCH_MAX) throw new Error(`a vector delete takes at most ${VECTOR_BATCH_MAX} keys, not ${keys.length}`);
    if (!keys.length) return;
    for (const key of keys) checkVectorKey(key);
    try {
      await this.call('DeleteVectors', () => this.client.send(new DeleteVectorsCommand({ vectorBucketName: this.bucket, indexName: index, keys })));
    } catch (error) {
      // The index gone (a collection deleted meanwhile) took these keys with it.
      if (classifyAwsError(error).kind === 'not_found') return;
      throw error;
    }
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

  /**
   * ListVectors with its metadata (which needs s3vectors:GetVectors beside ListVectors), the payload
   * dropped. The cursor is S3 Vectors' nextToken; one it refuses (expired) starts the listing again.
   */
  async list(index: string, page: { limit: number; cursor?: string }): Promise<{ entries: VectorListed[]; cursor?: string }> {
    const { limit } = page;
    if (!Number.isInteger(limit) || limit < 1 || limit > VECTOR_LIST_MAX) throw new Error(`a listing takes 1 to ${VECTOR_LIST_MAX} entries a page, not ${limit}`);
    const send = (nextToken?: string) =>
      this.call('ListVectors', () =>
        this.client.send(new ListVectorsCommand({ vectorBucketName: this.bucket, indexName: index, maxResults: limit, returnMetadata: true, ...(nextToken ? { nextToken } : {}) })),
      );
    let answer;
    try {
      answer = await send(page.cursor).catch(async (error) => {
        if (page.cursor === undefined || (error as { name?: unknown }).name !== 'ValidationException') throw error;
        return send();
      });
    } catch (error) {
      if (classifyAwsError(error).kind === 'not_found') return { entries: [] };
      throw error;
    }
    const entries = (answer.vectors ?? []).map((v) => {
      if (v.key === undefined) throw new Error('S3 Vectors ListVectors returned a vector without its key');
      const { [PAYLOAD_KEY]: _payload, ...filterable } = (v.metadata ?? {}) as Record<string, unknown>;
      return { key: v.key, filterable: filterable as VectorListed['filterable'] };
    });
    return answer.nextToken ? { entries, cursor: answer.nextToken } : { entries };
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


function finiteValues(vector: Float32Array, what: string): number[] {
  const values = Array.from(vector);
  if (!values.every(Number.isFinite)) throw new Error(`${what} has a component that is not finite`);
  return values;
}

const vectorValues = (entry: VectorEntry) => finiteValues(entry.vector, `vector ${entry.key}`);

/** The entry's metadata as S3 Vectors stores it: its filterable keys and the payload, each limit checked. */
function metadataOf(entry: VectorEntry): Record<string, Document> {
  const L = S3_VECTORS_ENTRY_LIMITS;
  if (Object.hasOwn(entry.filterable, PAYLOAD_KEY)) throw new Error(`vector ${entry.key}: "${PAYLOAD_KEY}" is the payload's metadata key, not a filterable one`);
  checkVectorEntry(entry);
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
  checkVectorFilter(filter);
  const clauses = Object.entries(filter).map(([key, condition]): Record<string, Document> => {
    if (key === PAYLOAD_KEY) throw new Error(`a vector filter cannot test "${key}"`);
    if (typeof condition === 'object' && condition !== null) return { [key]: { $in: (condition as { $in: Document[] }).$in } };
    return { [key]: { $eq: condition } };
  });
  if (!clauses.length) return undefined;
  return clauses.length === 1 ? clauses[0] : { $and: clauses };
}
