/**
 * The engine ports. Domain code talks only to these; `aws/` and `embedded/` implement them.
 * Semantics follow the AWS service each port is shaped like, including its limits (limits.ts).
 */
import type { Readable } from 'node:stream';

// ---------- key-value store (shaped like one DynamoDB table) ----------

export type KvValue = string | number | boolean | null | KvValue[] | { [key: string]: KvValue };

/**
 * An item. `pk`/`sk` form the primary key. Reserved attributes:
 * `gsi1pk`/`gsi1sk` and `gsi2pk`/`gsi2sk` (index keys; an item is in an index only when both are set),
 * `expires_at` (Unix seconds; once passed, the item is invisible to every read and condition).
 */
export interface KvItem {
  pk: string;
  sk: string;
  [attribute: string]: KvValue | undefined;
}

export interface KvKey {
  pk: string;
  sk: string;
}

export type KvIndex = 'gsi1' | 'gsi2';

/** Condition on the item currently stored under the key. An expired item counts as absent. */
export type KvCondition =
  | { ifAbsent: true }
  | { ifExists: true }
  /** The item exists and each named attribute equals the value (deep equality). */
  | { ifEquals: Record<string, KvValue> }
  /**
   * Each named attribute is a number below the value, a missing attribute (or item) counting as 0 as
   * `add` counts it: a counter an update may move only while it is under a cap.
   */
  | { ifBelow: Record<string, number> };

export interface KvPut {
  put: KvItem;
  condition?: KvCondition;
}
export interface KvUpdate {
  update: KvKey;
  /** Attributes to set (an `undefined` value is ignored). */
  set?: Record<string, KvValue | undefined>;
  /** Numeric attributes to add to (a missing attribute counts as 0): atomic counters. */
  add?: Record<string, number>;
  remove?: string[];
  condition?: KvCondition;
}
export interface KvDelete {
  delete: KvKey;
  condition?: KvCondition;
}
export interface KvCheck {
  check: KvKey;
  condition: KvCondition;
}
export type KvWrite = KvPut | KvUpdate | KvDelete | KvCheck;

/** The key a write applies to. */
export function writeKey(w: KvWrite): KvKey {
  return 'put' in w ? { pk: w.put.pk, sk: w.put.sk } : 'update' in w ? w.update : 'delete' in w ? w.delete : w.check;
}

export type KvSortKeyCondition =
  | { beginsWith: string }
  | { between: [string, string] }
  | { gt: string }
  | { gte: string }
  | { lt: string }
  | { lte: string };

export interface KvQuery {
  /** Query the table (default) or one of the generic indexes. */
  index?: KvIndex;
  /** Partition key value (of the index when `index` is set). */
  pk: string;
  sk?: KvSortKeyCondition;
  descending?: boolean;
  /** Most items to return (the page also stops at 1 MB of items read, as DynamoDB does). */
  limit?: number;
  /** Opaque cursor from a previous page. */
  cursor?: string;
}

export interface KvPage {
  items: KvItem[];
  /** Present when more items may follow. */
  cursor?: string;
}

export interface KeyValueStore {
  /** Strongly consistent read. */
  get(key: KvKey): Promise<KvItem | undefined>;
  /** Strongly consistent reads of up to 100 distinct keys (BatchGetItem), answered in key order. */
  getMany(keys: KvKey[]): Promise<(KvItem | undefined)[]>;
  put(item: KvItem, condition?: KvCondition): Promise<void>;
  /** Applies the update (creating the item if absent, as DynamoDB does) and returns the new item. */
  update(update: Omit<KvUpdate, 'update'> & { key: KvKey }): Promise<KvItem>;
  delete(key: KvKey, condition?: KvCondition): Promise<void>;
  query(query: KvQuery): Promise<KvPage>;
  /**
   * A cursor that continues `query` just after `item`, one of its results: a reader that stops inside a
   * page (its own budget is full) resumes exactly there rather than at the page's end.
   */
  cursorAfter(query: KvQuery, item: KvItem): string;
  /** Up to 100 writes on distinct items, 4 MB in all: every one applies or none does. */
  transact(writes: KvWrite[]): Promise<void>;
}

// ---------- blob store (shaped like S3) ----------

export type BlobBody = Readable | Uint8Array;

export interface BlobExpectation {
  /** 64 lowercase hex; the bytes must hash to it or nothing is kept. */
  sha256?: string;
  /** Exact byte count; a different count keeps nothing. */
  size?: number;
}

export interface StoredBlob {
  size: number;
  sha256: string;
}

export interface BlobStore {
  /** Streams the body to storage while hashing it; never buffers the whole body. */
  put(key: string, body: BlobBody, expect?: BlobExpectation): Promise<StoredBlob>;
  get(key: string): Promise<{ body: Readable; size: number } | undefined>;
  head(key: string): Promise<{ size: number } | undefined>;
  /** Deleting a missing key is not an error. */
  delete(key: string): Promise<void>;
  createMultipart(key: string): Promise<string>;
  uploadPart(key: string, uploadId: string, partNumber: number, body: BlobBody, size?: number): Promise<{ etag: string; size: number }>;
  /** Joins the parts in order, checks the whole object against `expect`, and keeps it only if it matches. */
  completeMultipart(
    key: string,
    uploadId: string,
    parts: { partNumber: number; etag: string }[],
    expect?: BlobExpectation,
  ): Promise<StoredBlob>;
  abortMultipart(key: string, uploadId: string): Promise<void>;
  /**
   * A complete in two steps, so the long one can run elsewhere (docs/decisions/upload-checks.md):
   * joins the parts in order (checked as completeMultipart checks them) without reading them, the
   * joined bytes waiting under no key until checkJoined. The upload is no longer open afterwards.
   */
  joinMultipart(key: string, uploadId: string, parts: { partNumber: number; etag: string }[]): Promise<void>;
  /**
   * Reads what joinMultipart joined for `uploadId` through SHA-256 and keeps it at `key` only if it
   * matches `expect` (the joined bytes are consumed either way; BlobMismatchError when they do not
   * match). Stopped by `signal`, it throws the signal's reason and keeps them for a later call.
   * UploadNotFoundError when nothing joined waits (never joined, or checked already).
   */
  checkJoined(key: string, uploadId: string, expect: BlobExpectation, signal?: AbortSignal): Promise<StoredBlob>;
  /**
   * The parts an open upload holds, ascending by number (the last sent under a number), parts sent
   * straight to the store through partUrl included: what a client that names no etags completes with.
   * UploadNotFoundError when the upload is not open.
   */
  listParts(key: string, uploadId: string): Promise<{ partNumber: number; etag: string; size: number }[]>;

  // A store behind a runtime that cannot carry big bodies (S3 behind API Gateway and Lambda) also
  // hands out URLs a client follows to send or fetch bytes directly, and tells what arrived that way
  // (docs/data/blobs.md, "Large files on AWS"). Stores the local server streams through have none.

  /** A URL serving the bytes at `key` for `expiresInSeconds`. */
  downloadUrl?(key: string, expiresInSeconds: number): Promise<string>;
  /**
   * Where the bytes at `key` are on this machine's disk, for a program that reads a file in place
   * (ffprobe and ffmpeg on a recording: knowledge jobs); undefined when absent. Only a store on local
   * disk has it; never written through.
   */
  filePath?(key: string): Promise<string | undefined>;
  /**
   * A URL storing exactly `expect.size` bytes at `key` for `expiresInSeconds`, with `expect.sha256` as
   * the store's checksum condition where it has one (what arrives is checked again by describe()).
   */
  uploadUrl?(key: string, expect: Required<BlobExpectation>, expiresInSeconds: number): Promise<string>;
  /** A URL taking part `partNumber` (exactly `size` bytes) of the multipart upload `uploadId`. */
  partUrl?(key: string, uploadId: string, partNumber: number, size: number, expiresInSeconds: number): Promise<string>;
  /** Copies what `from` holds to `to` (a new key of the store's own: what an upload URL wrote, adopted). */
  copy?(from: string, to: string): Promise<void>;
  /** Size and SHA-256 of what `key` holds (the store's own checksum when it kept one, else by reading it); undefined when absent. */
  describe?(key: string): Promise<StoredBlob | undefined>;
}

// ---------- queue (shaped like SQS with a redrive policy) ----------

export interface QueueMessage {
  id: string;
  body: string;
  /** Handle for delete and changeVisibility; valid for this receive only. */
  receipt: string;
  /** How many times the message has been received, this receive included. */
  receiveCount: number;
}

export interface QueueSendOptions {
  /** At most 900 s, as SQS allows. */
  delaySeconds?: number;
  /**
   * The tenant the message belongs to (SQS fair queues' MessageGroupId: 1 to 128 ASCII letters,
   * digits and punctuation). Receives share out messages across groups, so one group's backlog does
   * not hold up another's messages; a message without a group is a group of its own. Not an order.
   */
  group?: string;
}

export interface Queue {
  /** Returns the message id. */
  send(queue: string, body: string, options?: QueueSendOptions): Promise<string>;
  /** Leases up to `max` (1..10) visible messages for `visibilitySeconds`. */
  receive(queue: string, options: { max: number; visibilitySeconds: number }): Promise<QueueMessage[]>;
  delete(queue: string, receipt: string): Promise<void>;
  changeVisibility(queue: string, receipt: string, visibilitySeconds: number): Promise<void>;
}

/** A queue consumer: given a batch, returns the ids of the messages that failed (SQS partial batch response). */
export type QueueConsumer = (messages: QueueMessage[]) => Promise<{ failed: string[] }>;

// ---------- WebSocket connection gateway (shaped like the API Gateway Management API) ----------

/** What a connection serves, as the $connect that opened it recorded it (plain strings and numbers). */
export type ConnectionRecord = Record<string, string | number>;

export interface ConnectionGateway {
  /**
   * True where this process holds the sockets it accepted (the local server: a stream session in the
   * process serves each one); false where API Gateway holds them and each frame, ack and close
   * reaches a function that must look the connection up (`recall`).
   */
  readonly holdsSockets: boolean;
  /** Sends one frame. Returns false when the connection is gone. */
  post(connectionId: string, data: string): Promise<boolean>;
  disconnect(connectionId: string): Promise<void>;
  /** Records what a connection serves, for `ttlSeconds` (the connection table in AWS). */
  remember(connectionId: string, record: ConnectionRecord, ttlSeconds: number): Promise<void>;
  /** The record of a live connection; undefined once forgotten or expired. */
  recall(connectionId: string): Promise<ConnectionRecord | undefined>;
  forget(connectionId: string): Promise<void>;
}

// ---------- token signing key (shaped like an asymmetric KMS key) ----------

/** A public key that verifies tokens, as a JWK (EC P-256) with its key id. */
export interface PublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  alg: 'ES256';
  use: 'sig';
}

/**
 * Signs with the current private key (ES256: ECDSA P-256 over SHA-256); the private key never leaves
 * the signer. Earlier keys keep verifying until they are retired, so keys can rotate.
 */
export interface Signer {
  /** Returns the key id and the raw JOSE signature (r || s, 64 bytes). */
  sign(data: Uint8Array): Promise<{ keyId: string; signature: Uint8Array }>;
  /** Every key that may verify a live token, current first. */
  publicKeys(): Promise<PublicJwk[]>;
}

// ---------- server secret (shaped like a Secrets Manager secret) ----------

/**
 * The platform's own secret: at least 32 random bytes, the same in every process of one deployment,
 * never sent to a client. Keys for one purpose each (cursor sealing) are derived from it
 * (lambdas/shared/server-keys.ts), so adding a purpose needs no new secret.
 */
export interface ServerSecret {
  get(): Promise<Uint8Array>;
}

/**
 * Upstream API keys of model routes, by the name a route gives (`api_key_env`): an environment
 * variable of the local server, a Secrets Manager secret in AWS. Never stored in the platform's data;
 * read once per process and kept.
 */
export interface UpstreamKeys {
  /** The key, or undefined when nothing goes by that name. */
  get(name: string): Promise<string | undefined>;
}

// ---------- vector index (shaped like an Amazon S3 Vectors index) ----------

/** A filterable metadata value: a string, a number, a boolean, or an array of strings (matched by any element). */
export type VectorMetadataValue = string | number | boolean | string[];
export type VectorMetadata = Record<string, VectorMetadataValue>;
export type VectorScalar = string | number | boolean;
/**
 * Every key must hold. A scalar is equality (against an array value: any element equals it);
 * `{$in: [...]}` (1 to 20 values) is equality with any of them. A key an entry lacks never matches.
 */
export type VectorFilter = Record<string, VectorScalar | { $in: VectorScalar[] }>;

export interface VectorEntry {
  /** 1 to 1,024 bytes, unique in its index: a put of a stored key replaces the entry. */
  key: string;
  /** Exactly the index's dimensions, every component finite. */
  vector: Float32Array;
  /** What filters test; at most 2 KiB as JSON (S3 Vectors' filterable metadata) and 40 keys. */
  filterable: VectorMetadata;
  /** Returned with each hit, never filtered on; at most 32 KiB as a JSON string, escapes included (S3 Vectors measures its metadata as JSON). */
  payload: string;
}

export interface VectorHit {
  key: string;
  /** Cosine similarity to the query vector: 1 is the same direction, higher is closer. */
  score: number;
  payload: string;
}

/** Most entries a put or delete takes, and most hits a query returns (S3 Vectors' limits). */
export const VECTOR_BATCH_MAX = 500;
/** Most bytes an entry's payload takes, measured as a JSON string with its escapes (S3 Vectors measures metadata so). */
export const VECTOR_PAYLOAD_BYTES_MAX = 32 * 1024;
export const VECTOR_TOP_K_MAX = 100;

/**
 * Named vector indexes of one dimension each, cosine metric. Every write is durable and visible to
 * every process once it resolves (a put in one worker is found by the next query in another); a
 * write is whole per entry, not across entries (the vector database orders its own commits,
 * lambdas/vector/ledger.ts).
 */
export interface VectorIndex {
  /** Creates the index if absent; an index of that name with other dimensions is an Error. */
  createIndex(index: string, dimensions: number): Promise<void>;
  /** Removes the index and every entry in it; a missing index is not an error. */
  deleteIndex(index: string): Promise<void>;
  /** Stores up to VECTOR_BATCH_MAX entries. A missing index is an Error. */
  put(index: string, entries: VectorEntry[]): Promise<void>;
  /** Removes up to VECTOR_BATCH_MAX keys; missing keys, or a missing index, are not an error. */
  delete(index: string, keys: string[]): Promise<void>;
  /**
   * The `topK` (1 to VECTOR_TOP_K_MAX) entries most similar to `vector` among those `filter` keeps,
   * best first: fewer only when fewer are kept, however selective the filter.
   */
  query(index: string, query: { vector: Float32Array; topK: number; filter?: VectorFilter }): Promise<VectorHit[]>;
  /**
   * A page of up to `limit` (1 to VECTOR_LIST_MAX) entries' keys with their filterable metadata, from
   * `cursor` (the previous page's) on; `cursor` is absent on the last page. Every entry stored for the
   * whole listing is listed once; one put or deleted meanwhile may be listed or not. A missing index
   * lists nothing; a cursor the engine no longer takes lists from the start again. For sweeps, which
   * must find entries no record names (lambdas/knowledge/index-sweep.ts).
   */
  list(index: string, page: { limit: number; cursor?: string }): Promise<{ entries: VectorListed[]; cursor?: string }>;
}

/** An entry as a listing gives it: no vector, no payload. */
export interface VectorListed {
  key: string;
  filterable: VectorMetadata;
}

/** Most entries a listing page holds (S3 Vectors' ListVectors maxResults). */
export const VECTOR_LIST_MAX = 1000;

// ---------- clock ----------

export interface Clock {
  /** Unix milliseconds. */
  now(): number;
  sleep(ms: number): Promise<void>;
}

export interface Engine {
  name: 'aws' | 'embedded';
  kv: KeyValueStore;
  blobs: BlobStore;
  queue: Queue;
  connections: ConnectionGateway;
  signer: Signer;
  secret: ServerSecret;
  upstreamKeys: UpstreamKeys;
  vectors: VectorIndex;
  clock: Clock;
  close(): Promise<void>;
}
