/**
 * An engine that counts what AWS would bill for each port call, in front of any engine (the cost
 * model runs it over the embedded one): DynamoDB request units, S3 and SQS requests. It maps each
 * port call to the requests the AWS adapter makes for it (lambdas/engine/aws/) and sizes items as the
 * key-value port does (lambdas/engine/item-size.ts, DynamoDB's own rule).
 *
 * DynamoDB (on-demand, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html):
 * - reads are strongly consistent on the table (one unit per 4 KB, at least one, a missing item too);
 *   an index query is eventually consistent (half a unit per 4 KB); a query bills the total bytes it read;
 *   a batch get bills each item rounded up on its own;
 * - a write bills the larger of the item before and after, one unit per KB (at least one), also when its
 *   condition fails; in a transaction each item bills twice, condition checks included;
 * - each index the item is in, before or after, bills a write of its own (both generic indexes project
 *   every attribute, lib/storage.ts): one where the item enters, leaves or changes in place, two where
 *   its index key changes (a delete and a put).
 * The sizes of the items before and after a write are read from the engine underneath, uncounted.
 */
import { itemSize } from '../../lambdas/engine/item-size.js';
import type {
  BlobBody,
  BlobExpectation,
  BlobStore,
  Engine,
  KeyValueStore,
  KvCondition,
  KvItem,
  KvKey,
  KvPage,
  KvQuery,
  KvUpdate,
  KvWrite,
  Queue,
  StoredBlob,
} from '../../lambdas/engine/ports.js';
import { writeKey } from '../../lambdas/engine/ports.js';
import { TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';

/** What one call (or several) made AWS bill. */
export interface Usage {
  /** DynamoDB read request units. */
  readUnits: number;
  /** DynamoDB write request units, index writes included. */
  writeUnits: number;
  /** DynamoDB API calls (a transaction or a batch counts one). */
  dynamoCalls: number;
  /** S3 requests of the PUT class (PUT, COPY, POST, multipart parts) and of the GET class (GET, HEAD). DELETE is free. */
  s3Puts: number;
  s3Gets: number;
  /** SQS requests, each 64 KB of a message body counting one. */
  sqsRequests: number;
}

export const noUsage = (): Usage => ({ readUnits: 0, writeUnits: 0, dynamoCalls: 0, s3Puts: 0, s3Gets: 0, sqsRequests: 0 });

export function addUsage(a: Usage, b: Partial<Usage>): Usage {
  const sum = { ...a };
  for (const k of Object.keys(sum) as (keyof Usage)[]) sum[k] += b[k] ?? 0;
  return sum;
}

const KB = 1024;
const READ_UNIT_BYTES = 4 * KB;
const WRITE_UNIT_BYTES = KB;
const SQS_CHUNK_BYTES = 64 * KB;
/** What the S3 adapter reads into memory before it switches to a multipart upload (lambdas/engine/aws/blobs.ts). */
const S3_PART_BYTES = 8 * 1024 * KB;

export const readUnits = (bytes: number, consistent: boolean): number => Math.max(1, Math.ceil(bytes / READ_UNIT_BYTES)) * (consistent ? 1 : 0.5);
export const writeUnits = (bytes: number): number => Math.max(1, Math.ceil(bytes / WRITE_UNIT_BYTES));
export const sqsRequests = (bodyBytes: number): number => Math.max(1, Math.ceil(bodyBytes / SQS_CHUNK_BYTES));

const INDEXES = Object.values(TABLE_SCHEMA.indexes);
const sizeOf = (item: KvItem | undefined) => (item ? itemSize(item) : 0);

/** Index writes a change from `before` to `after` makes (either may be absent). */
export function indexWriteUnits(before: KvItem | undefined, after: KvItem | undefined): number {
  let units = 0;
  for (const { partitionKey, sortKey } of INDEXES) {
    const keyIn = (item: KvItem | undefined) => (item && item[partitionKey] != null && item[sortKey] != null ? `${item[partitionKey]}\u0000${item[sortKey]}` : undefined);
    const was = keyIn(before);
    const is = keyIn(after);
    if (was === undefined && is === undefined) continue;
    if (was !== undefined && is !== undefined && was !== is) units += writeUnits(sizeOf(before)) + writeUnits(sizeOf(after));
    else units += writeUnits(Math.max(sizeOf(before), sizeOf(after)));
  }
  return units;
}

/** One counted request: the AWS operation, what it touched (a key's partition prefix, a queue), what it billed. */
export interface MeteredRequest {
  request: string;
  on: string;
  usage: Partial<Usage>;
}

/** A key's partition prefix (`rec#…` → `rec#`): what kind of item, without the tenant's ids. */
const kind = (pk: string) => pk.replace(/#.*$/, '#');
/** An object key's first segment: what kind of object. */
const objectKind = (key: string) => key.replace(/\/.*$/, '/');

/** Counts into `usage` while `on`; off, every call goes straight through (for timing). `log` keeps each request when set. */
export class Meter {
  usage = noUsage();
  on = true;
  log: MeteredRequest[] | undefined;

  take(): Usage {
    const taken = this.usage;
    this.usage = noUsage();
    return taken;
  }

  add(u: Partial<Usage>, request: string, on: string): void {
    if (!this.on) return;
    this.usage = addUsage(this.usage, u);
    this.log?.push({ request, on, usage: u });
  }
}

/**
 * `inner` with some of its methods replaced: every other property (a method the port gains later
 * included) is `inner`'s own, bound to it, so the wrapper never hides part of a port.
 */
function intercept<T extends object>(inner: T, overrides: Partial<T>): T {
  return new Proxy(inner, {
    get(target, prop) {
      if (Object.hasOwn(overrides, prop)) return overrides[prop as keyof T];
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

function meteredKv(inner: KeyValueStore, meter: Meter): KeyValueStore {
  /** One single-item write: bills the larger of before and after, plus its index writes, also when it fails. */
  const write = async <T>(request: string, key: KvKey, run: () => Promise<T>, afterOf: () => KvItem | undefined): Promise<T> => {
    if (!meter.on) return run();
    const before = await inner.get({ pk: key.pk, sk: key.sk });
    let ok = false;
    try {
      const out = await run();
      ok = true;
      return out;
    } finally {
      const after = ok ? afterOf() : before;
      meter.add({ dynamoCalls: 1, writeUnits: writeUnits(Math.max(sizeOf(before), sizeOf(after))) + (ok ? indexWriteUnits(before, after) : 0) }, request, kind(key.pk));
    }
  };
  return intercept(inner, {
    async get(key: KvKey) {
      const item = await inner.get(key);
      meter.add({ dynamoCalls: 1, readUnits: readUnits(sizeOf(item), true) }, 'GetItem', kind(key.pk));
      return item;
    },
    async getMany(keys: KvKey[]) {
      const items = await inner.getMany(keys);
      meter.add({ dynamoCalls: keys.length ? 1 : 0, readUnits: items.reduce((n, item) => n + readUnits(sizeOf(item), true), 0) }, 'BatchGetItem', [...new Set(keys.map((k) => kind(k.pk)))].join(' '));
      return items;
    },
    put: (item: KvItem, condition?: KvCondition) => write('PutItem', item, () => inner.put(item, condition), () => item),
    update(u: Omit<KvUpdate, 'update'> & { key: KvKey }) {
      let after: KvItem | undefined;
      return write('UpdateItem', u.key, async () => (after = await inner.update(u)), () => after);
    },
    delete: (key: KvKey, condition?: KvCondition) => write('DeleteItem', key, () => inner.delete(key, condition), () => undefined),
    async query(q: KvQuery): Promise<KvPage> {
      const page = await inner.query(q);
      const bytes = page.items.reduce((n, item) => n + sizeOf(item), 0);
      meter.add({ dynamoCalls: 1, readUnits: readUnits(bytes, q.index === undefined) }, q.index ? `Query ${q.index}` : 'Query', kind(q.pk));
      return page;
    },
    async transact(writes: KvWrite[]) {
      if (!meter.on) return inner.transact(writes);
      const keys = writes.map(writeKey);
      const before = await inner.getMany(keys);
      try {
        await inner.transact(writes);
      } finally {
        const after = await inner.getMany(keys);
        let units = 0;
        writes.forEach((w, i) => {
          units += 2 * writeUnits(Math.max(sizeOf(before[i]), sizeOf(after[i])));
          if (!('check' in w)) units += indexWriteUnits(before[i], after[i]);
        });
        meter.add({ dynamoCalls: 1, writeUnits: units }, 'TransactWriteItems', keys.map((k) => kind(k.pk)).join(' '));
      }
    },
  });
}

function meteredBlobs(inner: BlobStore, meter: Meter): BlobStore {
  return intercept(inner, {
    async put(key: string, body: BlobBody, expect?: BlobExpectation): Promise<StoredBlob> {
      const stored = await inner.put(key, body, expect);
      // The S3 adapter: bytes in memory, one PutObject; a stream of known size, a staged PutObject then a
      // CopyObject (and a free delete); of unknown size, one PutObject up to a part, else a multipart
      // upload (create, parts, complete) then the copy.
      const puts =
        body instanceof Uint8Array ? 1 : expect?.size !== undefined ? 2 : stored.size <= S3_PART_BYTES ? 1 : 3 + Math.ceil(stored.size / S3_PART_BYTES);
      meter.add({ s3Puts: puts }, puts === 2 ? 'PutObject + CopyObject' : puts === 1 ? 'PutObject' : 'multipart upload + CopyObject', objectKind(key));
      return stored;
    },
    get(key: string) {
      meter.add({ s3Gets: 1 }, 'GetObject', objectKind(key));
      return inner.get(key);
    },
    head(key: string) {
      meter.add({ s3Gets: 1 }, 'HeadObject', objectKind(key));
      return inner.head(key);
    },
    createMultipart(key: string) {
      meter.add({ s3Puts: 1 }, 'CreateMultipartUpload', objectKind(key));
      return inner.createMultipart(key);
    },
    uploadPart(key: string, uploadId: string, partNumber: number, body: BlobBody, size?: number) {
      meter.add({ s3Puts: 1 }, 'UploadPart', objectKind(key));
      return inner.uploadPart(key, uploadId, partNumber, body, size);
    },
    completeMultipart(key: string, uploadId: string, parts: { partNumber: number; etag: string }[], expect?: BlobExpectation) {
      // Complete, read back to hash, copy to the key.
      meter.add({ s3Puts: 2, s3Gets: 1 }, 'CompleteMultipartUpload + GetObject + CopyObject', objectKind(key));
      return inner.completeMultipart(key, uploadId, parts, expect);
    },
  });
}

function meteredQueue(inner: Queue, meter: Meter): Queue {
  return intercept(inner, {
    send(queue: string, body: string, options?: { delaySeconds?: number }) {
      meter.add({ sqsRequests: sqsRequests(Buffer.byteLength(body)) }, 'SendMessage', queue);
      return inner.send(queue, body, options);
    },
    receive(queue: string, options: { max: number; visibilitySeconds: number }) {
      meter.add({ sqsRequests: 1 }, 'ReceiveMessage', queue);
      return inner.receive(queue, options);
    },
    delete(queue: string, receipt: string) {
      meter.add({ sqsRequests: 1 }, 'DeleteMessage', queue);
      return inner.delete(queue, receipt);
    },
    changeVisibility(queue: string, receipt: string, visibilitySeconds: number) {
      meter.add({ sqsRequests: 1 }, 'ChangeMessageVisibility', queue);
      return inner.changeVisibility(queue, receipt, visibilitySeconds);
    },
  });
}

/** `engine` with its key-value store, blobs and queue counted by `meter`; everything else is `engine`'s own. */
export function meteredEngine(engine: Engine, meter: Meter): Engine {
  return {
    ...engine,
    kv: meteredKv(engine.kv, meter),
    blobs: meteredBlobs(engine.blobs, meter),
    queue: meteredQueue(engine.queue, meter),
  };
}
