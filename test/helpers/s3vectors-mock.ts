/**
 * Amazon S3 Vectors in memory, behind aws-sdk-client-mock: the index and vector operations the
 * VectorIndex adapter uses (CreateIndex, GetIndex, DeleteIndex, PutVectors, DeleteVectors,
 * QueryVectors, ListVectors) with the service's documented semantics and limits, so the adapter is tested against
 * what AWS refuses (docs/decisions/vector-index-aws.md lists the sources):
 *
 * - names: buckets and indexes 3 to 63 lowercase letters, digits, hyphens and dots; keys 1 to 1,024
 *   characters; dimensions 1 to 4,096, float32 only, finite components, no zero vector under cosine;
 * - metadata: at most 50 keys, 40 KiB in all and 2 KiB of filterable metadata (both measured as
 *   UTF-8 JSON), at most 10 non-filterable keys an index; values strings, numbers, booleans or lists;
 * - 500 vectors a PutVectors or DeleteVectors call, topK 1 to 100, results in pages of `pageSize` with
 *   a `nextToken` (AWS pages results past its page size without saying the size; ours is small so the
 *   adapter's paging runs); ListVectors takes maxResults 1 to 1,000 and answers metadata only when
 *   asked, with a nextToken of its own (one it never issued is a 400, as an expired one);
 * - throttling per index, in a sliding second: 1,000 PutVectors/DeleteVectors requests and 2,500
 *   vectors written or deleted, past which TooManyRequestsException (429);
 * - the filter language: implicit equality, `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`, `$in`, `$nin`,
 *   `$exists`, `$and`, `$or`; `$eq`/`$in` against a list value match by any element; a filter on a
 *   non-filterable key is a 400 ValidationException;
 * - exact search (an ENHANCED index filters before it searches, so a selective filter still fills
 *   topK); cosine distance is 1 - cosine similarity.
 */
import { mockClient, type AwsStub } from 'aws-sdk-client-mock';
import {
  ConflictException,
  CreateIndexCommand,
  DeleteIndexCommand,
  DeleteVectorsCommand,
  GetIndexCommand,
  ListVectorsCommand,
  NotFoundException,
  PutVectorsCommand,
  QueryVectorsCommand,
  S3VectorsClient,
  TooManyRequestsException,
  ValidationException,
  type CreateIndexCommandInput,
  type DeleteIndexCommandInput,
  type DeleteVectorsCommandInput,
  type GetIndexCommandInput,
  type ListVectorsCommandInput,
  type PutVectorsCommandInput,
  type QueryOutputVector,
  type QueryVectorsCommandInput,
} from '@aws-sdk/client-s3vectors';

/** S3 Vectors' limits (Amazon S3 User Guide, "Limitations and restrictions"), as the mock enforces them. */
export const S3_VECTORS_LIMITS = {
  vectorsPerWrite: 500,
  topK: 100,
  dimensionMax: 4096,
  keyChars: 1024,
  metadataKeys: 50,
  metadataBytes: 40 * 1024,
  filterableMetadataBytes: 2 * 1024,
  nonFilterableKeysPerIndex: 10,
  listMaxResults: 1000,
  writeRequestsPerSecond: 1000,
  vectorsWrittenPerSecond: 2500,
} as const;

type Metadata = Record<string, unknown>;

interface StoredIndex {
  name: string;
  arn: string;
  dimension: number;
  distanceMetric: 'cosine' | 'euclidean';
  nonFilterable: string[];
  createdAt: Date;
  vectors: Map<string, { data: Float32Array; metadata: Metadata }>;
  /** Times (ms) of recent write requests, and of each vector they wrote or deleted: the throttle's window. */
  writes: number[];
  written: number[];
}

export interface S3VectorsMockOptions {
  /** Buckets that exist (default: one, `vectors-test`). */
  buckets?: string[];
  /** QueryVectors results a page (default 30). */
  pageSize?: number;
  /** The clock of the throttle's window (default Date.now). */
  now?: () => number;
}

export interface S3VectorsMock {
  stub: AwsStub<any, any, any>;
  /** The stored indexes of a bucket, by name (tests read vectors and metadata back). */
  indexes(bucket?: string): Map<string, StoredIndex>;
  /** Every call the adapter made, by command name, in order. */
  calls(): { command: string; input: any }[];
  /** ListVectors' tokens expire (the next use of one is a 400). */
  forgetListTokens(): void;
  /** The next `times` calls of `command` fail with `error` (throttling, 503 ...) before anything happens. */
  failNext(command: string, error: Error, times?: number): void;
  reset(): void;
  restore(): void;
}

const meta = (status: number) => ({ $metadata: { httpStatusCode: status } });
const invalid = (message: string) => new ValidationException({ message, ...meta(400) });
const notFound = (message: string) => new NotFoundException({ message, ...meta(404) });
export const throttled = (message = 'Rate exceeded') => new TooManyRequestsException({ message, ...meta(429) });

const NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');

/**
 * Mocks `client` (an instance: only it is replaced) or every S3VectorsClient (the class) with an
 * in-memory S3 Vectors.
 */
export function mockS3Vectors(client: S3VectorsClient | typeof S3VectorsClient = S3VectorsClient, options: S3VectorsMockOptions = {}): S3VectorsMock {
  const stub = mockClient(client as never) as AwsStub<any, any, any>;
  const pageSize = options.pageSize ?? 30;
  const now = options.now ?? Date.now;
  const bucketNames = options.buckets ?? ['vectors-test'];
  let buckets = new Map<string, Map<string, StoredIndex>>();
  let log: { command: string; input: any }[] = [];
  let faults: { command: string; error: Error }[] = [];
  /** Pages of queries in progress, by token. */
  let pages = new Map<string, QueryOutputVector[]>();
  /** ListVectors tokens issued: the last key of the page each follows. */
  let listTokens = new Map<string, string>();

  const init = () => {
    buckets = new Map(bucketNames.map((b) => [b, new Map()]));
    log = [];
    faults = [];
    pages = new Map();
    listTokens = new Map();
  };

  const bucket = (input: { vectorBucketName?: string; vectorBucketArn?: string; indexArn?: string }) => {
    const name = input.vectorBucketName ?? input.vectorBucketArn?.split('/')[1] ?? input.indexArn?.split('/')[1];
    if (!name) throw invalid('vectorBucketName or vectorBucketArn is required');
    const found = buckets.get(name);
    if (!found) throw notFound(`The specified vector bucket could not be found: ${name}`);
    return { name, indexes: found };
  };
  const index = (input: { vectorBucketName?: string; indexName?: string; indexArn?: string }) => {
    const { indexes } = bucket(input);
    const name = input.indexName ?? input.indexArn?.split('/')[3];
    if (!name) throw invalid('indexName or indexArn is required');
    const found = indexes.get(name);
    if (!found) throw notFound(`The specified index could not be found: ${name}`);
    return found;
  };

  const handle =
    <I>(command: string, run: (input: I) => unknown) =>
    (input: I) => {
      log.push({ command, input: structuredClone(input) });
      const fault = faults.findIndex((f) => f.command === command);
      if (fault >= 0) throw faults.splice(fault, 1)[0].error;
      return run(input);
    };

  /** Counts a write request of `count` vectors against the index's second; over either limit is a 429. */
  const throttle = (target: StoredIndex, count: number) => {
    const t = now();
    target.writes = target.writes.filter((w) => w > t - 1000);
    target.written = target.written.filter((w) => w > t - 1000);
    if (target.writes.length + 1 > S3_VECTORS_LIMITS.writeRequestsPerSecond || target.written.length + count > S3_VECTORS_LIMITS.vectorsWrittenPerSecond) {
      throw throttled();
    }
    target.writes.push(t);
    for (let i = 0; i < count; i++) target.written.push(t);
  };

  const vectorData = (data: { float32?: number[] } | undefined, target: StoredIndex, what: string): Float32Array => {
    const values = data?.float32;
    if (!Array.isArray(values)) throw invalid(`${what}: data must be float32`);
    if (values.length !== target.dimension) throw invalid(`${what}: dimension ${values.length} does not match the index's ${target.dimension}`);
    if (!values.every((v) => typeof v === 'number' && Number.isFinite(v))) throw invalid(`${what}: values must be finite numbers`);
    if (target.distanceMetric === 'cosine' && values.every((v) => Math.fround(v) === 0)) throw invalid(`${what}: zero vectors are not allowed with the cosine metric`);
    return Float32Array.from(values);
  };

  const checkMetadata = (metadata: unknown, target: StoredIndex, key: string) => {
    if (metadata === undefined) return {};
    if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) throw invalid(`vector ${key}: metadata must be an object`);
    const entries = Object.entries(metadata as Metadata);
    if (entries.length > S3_VECTORS_LIMITS.metadataKeys) throw invalid(`vector ${key}: ${entries.length} metadata keys, over ${S3_VECTORS_LIMITS.metadataKeys}`);
    for (const [k, v] of entries) {
      const scalar = (x: unknown) => typeof x === 'string' || typeof x === 'boolean' || (typeof x === 'number' && Number.isFinite(x));
      if (!(scalar(v) || (Array.isArray(v) && v.every(scalar)))) throw invalid(`vector ${key}: metadata ${k} must be a string, number, boolean or list`);
    }
    if (bytes(metadata) > S3_VECTORS_LIMITS.metadataBytes) throw invalid(`vector ${key}: metadata is over ${S3_VECTORS_LIMITS.metadataBytes} bytes`);
    const filterable = Object.fromEntries(entries.filter(([k]) => !target.nonFilterable.includes(k)));
    if (bytes(filterable) > S3_VECTORS_LIMITS.filterableMetadataBytes) {
      throw invalid(`vector ${key}: filterable metadata is over ${S3_VECTORS_LIMITS.filterableMetadataBytes} bytes`);
    }
    return structuredClone(metadata as Metadata);
  };

  stub.on(CreateIndexCommand).callsFake(
    handle<CreateIndexCommandInput>('CreateIndex', (input) => {
      const { name: bucketName, indexes } = bucket(input);
      const name = input.indexName ?? '';
      if (!NAME.test(name)) throw invalid(`indexName ${name} is not a valid index name`);
      if (input.dataType !== 'float32') throw invalid('dataType must be float32');
      if (input.distanceMetric !== 'cosine' && input.distanceMetric !== 'euclidean') throw invalid('distanceMetric must be cosine or euclidean');
      const dimension = input.dimension ?? 0;
      if (!Number.isInteger(dimension) || dimension < 1 || dimension > S3_VECTORS_LIMITS.dimensionMax) throw invalid(`dimension must be 1 to ${S3_VECTORS_LIMITS.dimensionMax}`);
      const nonFilterable = input.metadataConfiguration?.nonFilterableMetadataKeys ?? [];
      if (nonFilterable.length > S3_VECTORS_LIMITS.nonFilterableKeysPerIndex) throw invalid(`at most ${S3_VECTORS_LIMITS.nonFilterableKeysPerIndex} non-filterable metadata keys`);
      if (indexes.has(name)) throw new ConflictException({ message: `An index with the name ${name} already exists`, ...meta(409) });
      const arn = `arn:aws:s3vectors:us-east-1:123456789012:bucket/${bucketName}/index/${name}`;
      indexes.set(name, { name, arn, dimension, distanceMetric: input.distanceMetric, nonFilterable: [...nonFilterable], createdAt: new Date(now()), vectors: new Map(), writes: [], written: [] });
      return { indexArn: arn };
    }),
  );

  stub.on(GetIndexCommand).callsFake(
    handle<GetIndexCommandInput>('GetIndex', (input) => {
      const found = index(input);
      const { name: bucketName } = bucket(input);
      return {
        index: {
          vectorBucketName: bucketName,
          indexName: found.name,
          indexArn: found.arn,
          creationTime: found.createdAt,
          dataType: 'float32',
          dimension: found.dimension,
          distanceMetric: found.distanceMetric,
          metadataConfiguration: found.nonFilterable.length ? { nonFilterableMetadataKeys: [...found.nonFilterable] } : undefined,
        },
      };
    }),
  );

  stub.on(DeleteIndexCommand).callsFake(
    handle<DeleteIndexCommandInput>('DeleteIndex', (input) => {
      const found = index(input);
      bucket(input).indexes.delete(found.name);
      return {};
    }),
  );

  stub.on(PutVectorsCommand).callsFake(
    handle<PutVectorsCommandInput>('PutVectors', (input) => {
      const target = index(input);
      const vectors = input.vectors ?? [];
      if (vectors.length < 1 || vectors.length > S3_VECTORS_LIMITS.vectorsPerWrite) throw invalid(`vectors must hold 1 to ${S3_VECTORS_LIMITS.vectorsPerWrite} vectors`);
      // The whole request is checked before anything is stored.
      const checked = vectors.map((v) => {
        const key = v.key ?? '';
        if (key.length < 1 || key.length > S3_VECTORS_LIMITS.keyChars) throw invalid(`key must be 1 to ${S3_VECTORS_LIMITS.keyChars} characters`);
        return { key, data: vectorData(v.data as { float32?: number[] }, target, `vector ${key}`), metadata: checkMetadata(v.metadata, target, key) };
      });
      throttle(target, checked.length);
      for (const v of checked) target.vectors.set(v.key, { data: v.data, metadata: v.metadata });
      return {};
    }),
  );

  stub.on(DeleteVectorsCommand).callsFake(
    handle<DeleteVectorsCommandInput>('DeleteVectors', (input) => {
      const target = index(input);
      const keys = input.keys ?? [];
      if (keys.length < 1 || keys.length > S3_VECTORS_LIMITS.vectorsPerWrite) throw invalid(`keys must hold 1 to ${S3_VECTORS_LIMITS.vectorsPerWrite} keys`);
      for (const key of keys) if (key.length < 1 || key.length > S3_VECTORS_LIMITS.keyChars) throw invalid(`key must be 1 to ${S3_VECTORS_LIMITS.keyChars} characters`);
      throttle(target, keys.length);
      for (const key of keys) target.vectors.delete(key);
      return {};
    }),
  );

  stub.on(QueryVectorsCommand).callsFake(
    handle<QueryVectorsCommandInput>('QueryVectors', (input) => {
      const target = index(input);
      const topK = input.topK ?? 0;
      if (!Number.isInteger(topK) || topK < 1 || topK > S3_VECTORS_LIMITS.topK) throw invalid(`topK must be 1 to ${S3_VECTORS_LIMITS.topK}`);
      let results: QueryOutputVector[];
      if (input.nextToken !== undefined) {
        const rest = pages.get(input.nextToken);
        if (!rest) throw invalid('The nextToken is invalid or expired');
        pages.delete(input.nextToken);
        results = rest;
      } else {
        const query = vectorData(input.queryVector as { float32?: number[] }, target, 'queryVector');
        const matches = input.filter === undefined ? () => true : compileFilter(input.filter, target.nonFilterable);
        results = [...target.vectors.entries()]
          .filter(([, v]) => matches(v.metadata))
          .map(([key, v]) => ({ key, d: distance(target.distanceMetric, query, v.data), metadata: v.metadata }))
          .sort((a, b) => a.d - b.d || (a.key < b.key ? -1 : 1))
          .slice(0, topK)
          .map((r) => ({
            key: r.key,
            ...(input.returnDistance ? { distance: r.d } : {}),
            ...(input.returnMetadata ? { metadata: structuredClone(r.metadata) as QueryOutputVector['metadata'] } : {}),
          }));
      }
      const page = results.slice(0, pageSize);
      const rest = results.slice(pageSize);
      let nextToken: string | undefined;
      if (rest.length) {
        nextToken = `page-${log.length}-${Math.random().toString(36).slice(2)}`;
        pages.set(nextToken, rest);
      }
      return { vectors: page, distanceMetric: target.distanceMetric, ...(nextToken ? { nextToken } : {}) };
    }),
  );

  stub.on(ListVectorsCommand).callsFake(
    handle<ListVectorsCommandInput>('ListVectors', (input) => {
      const target = index(input);
      const max = input.maxResults ?? 500;
      if (!Number.isInteger(max) || max < 1 || max > S3_VECTORS_LIMITS.listMaxResults) throw invalid(`maxResults must be 1 to ${S3_VECTORS_LIMITS.listMaxResults}`);
      let after = '';
      if (input.nextToken !== undefined) {
        const last = listTokens.get(input.nextToken);
        if (last === undefined) throw invalid('The nextToken is invalid or expired');
        after = last;
      }
      const keys = [...target.vectors.keys()].filter((k) => k > after).sort();
      const page = keys.slice(0, max);
      let nextToken: string | undefined;
      if (keys.length > max) {
        nextToken = `list-${log.length}-${Math.random().toString(36).slice(2)}`;
        listTokens.set(nextToken, page[page.length - 1]);
      }
      const vectors = page.map((key) => ({ key, ...(input.returnMetadata ? { metadata: structuredClone(target.vectors.get(key)!.metadata) } : {}) }));
      return { vectors, ...(nextToken ? { nextToken } : {}) };
    }),
  );

  init();
  return {
    stub,
    indexes: (name = bucketNames[0]) => buckets.get(name) ?? new Map(),
    calls: () => log,
    forgetListTokens: () => listTokens.clear(),
    failNext(command, error, times = 1) {
      for (let i = 0; i < times; i++) faults.push({ command, error });
    },
    reset: init,
    restore: () => stub.restore(),
  };
}

/** Cosine distance (1 - cosine similarity) or Euclidean distance, in float64 over the float32 components. */
function distance(metric: 'cosine' | 'euclidean', a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  let sq = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
    sq += (a[i] - b[i]) ** 2;
  }
  return metric === 'cosine' ? 1 - dot / (Math.sqrt(na) * Math.sqrt(nb)) : Math.sqrt(sq);
}

type Predicate = (metadata: Metadata) => boolean;
const OPERATORS = new Set(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$exists']);
const isScalar = (x: unknown): x is string | number | boolean => typeof x === 'string' || typeof x === 'boolean' || (typeof x === 'number' && Number.isFinite(x));

/** S3 Vectors' filter language, checked as the service checks it (a 400 for what it refuses). */
export function compileFilter(filter: unknown, nonFilterable: readonly string[] = []): Predicate {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) throw invalid('filter must be an object');
  const clauses = Object.entries(filter as Record<string, unknown>);
  if (!clauses.length) throw invalid('filter must not be empty');
  const predicates = clauses.map(([key, condition]): Predicate => {
    if (key === '$and' || key === '$or') {
      if (!Array.isArray(condition) || condition.length === 0) throw invalid(`${key} takes a non-empty array of filters`);
      const parts = condition.map((c) => compileFilter(c, nonFilterable));
      return key === '$and' ? (m) => parts.every((p) => p(m)) : (m) => parts.some((p) => p(m));
    }
    if (key.startsWith('$')) throw invalid(`unknown filter operator ${key}`);
    if (nonFilterable.includes(key)) throw invalid(`metadata key ${key} is non-filterable and cannot be used in a filter`);
    return fieldPredicate(key, condition);
  });
  return (m) => predicates.every((p) => p(m));
}

function fieldPredicate(key: string, condition: unknown): Predicate {
  if (isScalar(condition)) return fieldPredicate(key, { $eq: condition });
  if (typeof condition !== 'object' || condition === null || Array.isArray(condition)) throw invalid(`filter on ${key}: a value or an operator object`);
  const ops = Object.entries(condition as Record<string, unknown>);
  if (!ops.length) throw invalid(`filter on ${key}: no operator`);
  const tests = ops.map(([op, operand]): ((value: unknown, present: boolean) => boolean) => {
    if (!OPERATORS.has(op)) throw invalid(`unknown filter operator ${op}`);
    const anyOf = (value: unknown, test: (x: unknown) => boolean) => (Array.isArray(value) ? value.some(test) : test(value));
    switch (op) {
      case '$eq':
      case '$ne': {
        if (!isScalar(operand)) throw invalid(`${op} takes a string, number or boolean`);
        const eq = (v: unknown, present: boolean) => present && anyOf(v, (x) => x === operand);
        return op === '$eq' ? eq : (v, present) => !eq(v, present);
      }
      case '$gt':
      case '$gte':
      case '$lt':
      case '$lte': {
        if (typeof operand !== 'number' || !Number.isFinite(operand)) throw invalid(`${op} takes a number`);
        const cmp = { $gt: (x: number) => x > operand, $gte: (x: number) => x >= operand, $lt: (x: number) => x < operand, $lte: (x: number) => x <= operand }[op];
        return (v, present) => present && typeof v === 'number' && cmp(v);
      }
      case '$in':
      case '$nin': {
        if (!Array.isArray(operand) || operand.length === 0 || !operand.every(isScalar)) throw invalid(`${op} takes a non-empty array of strings, numbers or booleans`);
        const hit = (v: unknown, present: boolean) => present && anyOf(v, (x) => operand.includes(x as never));
        return op === '$in' ? hit : (v, present) => !hit(v, present);
      }
      default: {
        if (typeof operand !== 'boolean') throw invalid('$exists takes a boolean');
        return (_v, present) => present === operand;
      }
    }
  });
  return (m) => {
    const present = Object.hasOwn(m, key);
    return tests.every((t) => t(m[key], present));
  };
}
