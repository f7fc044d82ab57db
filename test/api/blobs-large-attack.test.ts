/**
 * The large-file path on AWS under attack and careless use (docs/data/blobs.md, "Large files on AWS"):
 * crafted size headers, browser credentials and other tenants' ids reaching for URLs, races between
 * redirected PUTs, DELETEs, settlers and record writes, the upload relay fed odd requests and a bad
 * origin, and crafted bucket notifications. Each test asserts what the docs promise. The routes run as
 * Lambda behind API Gateway runs them (test/helpers/lambda-front.ts) over dynalite and s3rver.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CloudFrontRequestEvent, CloudFrontResultResponse, S3Event } from 'aws-lambda';
import { CompleteMultipartUploadCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { Engine } from '../../lambdas/engine/ports.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { flushActivity } from '../../lambdas/activity/activity.js';
import { LAMBDA_MAX_BODY_BYTES } from '../../lambdas/http/event.js';
import { ROUTES } from '../../lambdas/http/routes.js';
import { FILE_PATH_PATTERN } from '../../lib/data-edge.js';
import { handler as uploadRelay } from '../../lambdas/edge/upload-relay.js';
import { blobMetaKey } from '../../lambdas/data/keys.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import type { S3rverBucket } from '../helpers/s3rver.js';
import { deliverNotifications, type BucketNotifications } from '../helpers/bucket-notifications.js';
import { handler as settleNotification } from '../../lambdas/consumers/blob-arrivals.js';
import { MAX_OPEN_ARRIVALS } from '../../lambdas/data/blobs.js';
import { startLambdaFront, type LambdaFront } from '../helpers/lambda-front.js';

const MiB = 1024 * 1024;
const SIX = 6 * MiB; // over LAMBDA_MAX_BODY_BYTES: redirected
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const ORIGIN = 'https://photos.example';

let engine: Engine;
let s3: S3rverBucket;
let gateway: LambdaFront;
let orgId: string;
let server: Record<string, string>; // a secret key of the app
let other: Record<string, string>; // another organization's secret key
let pub: Record<string, string>; // a publishable key of the app
let alice: Record<string, string>; // an end-user token
let bucket: BucketNotifications;

const bearer = (k: string) => ({ authorization: `Bearer ${k}` });

function api(cred: Record<string, string>, method: string, path: string, init: { body?: Uint8Array | string; headers?: Record<string, string>; redirect?: 'manual' | 'follow' } = {}) {
  return fetch(gateway.url + path, { method, body: init.body, redirect: init.redirect ?? 'manual', headers: { ...cred, ...init.headers } });
}
const json = (cred: Record<string, string>, method: string, path: string, body: unknown) =>
  api(cred, method, path, { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
const code = async (r: Response) => ((await r.json()) as { error?: { code?: string } }).error?.code;
const blobPath = (hash: string, db = 'db') => `/v1/databases/${encodeURIComponent(db)}/blobs/${hash}`;
const announce = (cred: Record<string, string>, path: string, size: number | string) => api(cred, 'PUT', path, { headers: { 'upload-length': String(size) } });

/** Announces `bytes` (or `announced` bytes), sends `sent` (default: the same bytes) to the Location. */
async function redirectedPut(cred: Record<string, string>, hash: string, sent: Uint8Array, db = 'db', announced = sent.length): Promise<number> {
  const r = await announce(cred, blobPath(hash, db), announced);
  expect(r.status, await r.clone().text()).toBe(307);
  const to = await fetch(r.headers.get('location')!, { method: 'PUT', body: sent }).catch(() => undefined);
  await to?.arrayBuffer();
  return to?.status ?? 0;
}

async function objectsOf(hash: string): Promise<{ key: string; size: number }[]> {
  const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket }));
  return (listed.Contents ?? []).filter((o) => o.Key!.includes(hash)).map((o) => ({ key: o.Key!, size: o.Size ?? 0 }));
}

async function activityOf(hash: string, kind: string) {
  await bucket.delivered();
  await flushActivity(engine);
  const r = await api(server, 'GET', `/v1/activity?kind=${kind}&file_sha256=${hash}`);
  expect(r.status).toBe(200);
  return ((await r.json()) as { items: Record<string, unknown>[] }).items;
}

/** The file as a client gets it (following the redirect), or its status. */
async function download(cred: Record<string, string>, hash: string, db = 'db'): Promise<{ status: number; sha256?: string }> {
  const r = await api(cred, 'GET', blobPath(hash, db), { redirect: 'follow' });
  const bytes = Buffer.from(await r.arrayBuffer());
  return r.status === 200 ? { status: 200, sha256: sha(bytes) } : { status: r.status };
}

/** The invariant: the file is absent, or its metadata names bytes that are there and hash to its name. */
async function wholeOrAbsent(hash: string, db = 'db') {
  await bucket.delivered();
  const head = await api(server, 'HEAD', blobPath(hash, db)); // settles first, as every read does
  const meta = await engine.kv.get(blobMetaKey(orgId, db, hash));
  if (!meta) {
    expect(head.status).toBe(404);
    return false;
  }
  expect(head.status).toBe(200);
  expect(await download(server, hash, db)).toEqual({ status: 200, sha256: hash });
  return true;
}

const withoutNotifications = <T>(fn: () => Promise<T>) => bucket.withoutNotifications(fn);

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  const started = await startAwsDataEngine('blobs-attack');
  engine = started.engine;
  s3 = started.s3;
  useEngine(engine);
  bucket = deliverNotifications(s3);
  const tenants = new Tenants(engine.kv, () => Date.now());
  const org = await tenants.createOrganization('attacked');
  orgId = org.id;
  const ws = await tenants.createWorkspace(org.id, 'main');
  const app = await tenants.createApplication(ws.id, 'photos', []);
  server = bearer((await tenants.createSecretKey(org.id, app.id)).key);
  pub = { ...bearer((await new PublishableKeys(engine.kv, () => Date.now()).create(app.id, [ORIGIN])).key), origin: ORIGIN };
  const otherOrg = await tenants.createOrganization('attacker');
  other = bearer((await tenants.createSecretKey(otherOrg.id)).key);
  gateway = await startLambdaFront('data');

  const token = await json(server, 'POST', '/v1/end-user-tokens', { user_id: 'alice' });
  expect(token.status).toBe(200);
  alice = bearer(((await token.json()) as { token: string }).token);
  for (const db of ['db', 'db2', 'locked', '__proto__', 'constructor']) expect((await api(server, 'PUT', `/v1/databases/${db}`)).status).toBe(201);
  expect((await api(other, 'PUT', '/v1/databases/db')).status).toBe(201);
  const rules = { list: 'shared = true || owner = @auth.id', view: 'shared = true || owner = @auth.id', create: '@request.owner = @auth.id', update: 'owner = @auth.id', delete: 'owner = @auth.id' };
  const fields = [{ name: 'owner', type: 'text' }, { name: 'shared', type: 'bool' }, { name: 'file', type: 'blob' }];
  expect((await json(server, 'PUT', '/v1/databases/db/collections/photos', { fields, rules })).status).toBe(201);
  expect((await json(server, 'PUT', '/v1/databases/locked/collections/docs', { fields: [{ name: 'file', type: 'blob' }], rules: { view: 'public', create: 'users', update: 'users' } })).status).toBe(201);
}, 60_000);

afterAll(async () => {
  await bucket.delivered();
  await gateway?.close();
  await engine?.close();
});

describe('crafted Upload-Length and Content-Length', () => {
  const hash = sha(Buffer.from('never sent'));

  it.each([
    ['negative', '-6291456'],
    ['exponent', '6e6'],
    ['17 digits', '12345678901234567'],
    ['a list', `${SIX}, ${SIX}`],
    ['hex', '0x600000'],
    ['a fraction', '6291456.5'],
  ])('%s is no announcement: no URL, no arrival, a 4xx in the platform shape', async (_what, value) => {
    const r = await announce(server, blobPath(hash), value);
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.headers.get('location')).toBeNull();
    expect(['hash_mismatch', 'length_required', 'payload_too_large']).toContain(await code(r));
    const arrivals = await engine.kv.query({ pk: `arrivals#${orgId}#db`, sk: { beginsWith: hash } });
    expect(arrivals.items).toEqual([]);
  });

  it('16 digits (a number past every limit) is refused 413 before any URL, for a file and for a part', async () => {
    const r = await announce(server, blobPath(hash), '9999999999999999');
    expect(r.status).toBe(413);
    expect(r.headers.get('location')).toBeNull();
    const part = await announce(server, `${blobPath(hash)}/uploads/upl_00000000000000000000000000/parts/1`, '9999999999999999');
    expect(part.status).toBe(413);
  });

  it('0 announced has nowhere else to go: 411', async () => {
    const r = await announce(server, blobPath(hash), '0');
    expect(r.status).toBe(411);
    expect(await code(r)).toBe('length_required');
  });

  it('leading zeros are the same number: the URL takes exactly that many bytes', async () => {
    const bytes = randomBytes(SIX);
    const r = await announce(server, blobPath(sha(bytes)), `0000${SIX}`);
    expect(r.status).toBe(307);
    expect((await fetch(r.headers.get('location')!, { method: 'PUT', body: bytes })).status).toBe(200);
    expect(await wholeOrAbsent(sha(bytes))).toBe(true);
  }, 30_000);

  it('an announcement beside a body that is sent inline is no announcement: the body is checked as it is', async () => {
    const body = Buffer.from('ten bytes!');
    const r = await api(server, 'PUT', blobPath(hash), { body, headers: { 'upload-length': String(SIX) } });
    expect(r.status).toBe(400);
    expect(await code(r)).toBe('hash_mismatch');
    expect(r.headers.get('location')).toBeNull();
  });

  it('fewer or more bytes than announced sent to the URL: refused or deleted unseen, never visible', async () => {
    const bytes = randomBytes(SIX);
    const hash2 = sha(bytes);
    await redirectedPut(server, hash2, bytes.subarray(0, SIX - 1), 'db', SIX);
    await redirectedPut(server, hash2, Buffer.concat([bytes, Buffer.from('x')]), 'db', SIX);
    await bucket.delivered();
    expect(await wholeOrAbsent(hash2)).toBe(false);
    expect(await objectsOf(hash2)).toEqual([]);
  }, 30_000);
});

describe('browser credentials and other tenants reaching for URLs', () => {
  const bytes = randomBytes(SIX);
  const hash = sha(bytes);
  beforeAll(async () => {
    expect(await redirectedPut(server, hash, bytes)).toBe(200);
    await bucket.delivered();
  }, 30_000);

  it('a file no record they may view references: 404 to a publishable key and an end user, no Location', async () => {
    for (const cred of [pub, alice]) {
      const r = await api(cred, 'GET', blobPath(hash));
      expect(r.status).toBe(404);
      expect(r.headers.get('location')).toBeNull();
      expect(await code(r)).toBe('blob_not_found');
    }
  });

  it("a private record of alice's: alice gets the URL (never cached: a cache in front would hand it to others), the publishable key still 404", async () => {
    expect((await json(server, 'POST', '/v1/databases/db/collections/photos/records', { owner: 'alice', shared: false, file: hash })).status).toBe(201);
    expect((await api(pub, 'GET', blobPath(hash))).status).toBe(404);
    const redirect = await api(alice, 'GET', blobPath(hash));
    expect(redirect.status).toBe(307);
    expect(redirect.headers.get('cache-control')).toBe('no-store');
    expect(await download(alice, hash)).toEqual({ status: 200, sha256: hash });
  });

  it('an upload URL where no collection lets the credential upload: 403, no Location, no arrival', async () => {
    const r = await announce(pub, blobPath(hash, 'locked'), SIX);
    expect(r.status).toBe(403);
    expect(r.headers.get('location')).toBeNull();
    const opened = await api(server, 'POST', `${blobPath(hash, 'locked')}/uploads`);
    expect(opened.status).toBe(201);
    const { upload_id } = (await opened.json()) as { upload_id: string };
    const part = await announce(pub, `${blobPath(hash, 'locked')}/uploads/${upload_id}/parts/1`, SIX);
    expect(part.status).toBe(403);
    expect(part.headers.get('location')).toBeNull();
    const arrivals = await engine.kv.query({ pk: `arrivals#${orgId}#locked` });
    expect(arrivals.items).toEqual([]);
  });

  it("another organization's key: 404 for our file in its own database of the same name, and for our upload ids", async () => {
    const r = await api(other, 'GET', blobPath(hash));
    expect(r.status).toBe(404);
    expect(r.headers.get('location')).toBeNull();
    const opened = await api(server, 'POST', `${blobPath(sha(randomBytes(8)))}/uploads`);
    const { upload_id } = (await opened.json()) as { upload_id: string };
    const path = opened.url.replace(gateway.url, '').replace(/\/uploads$/, '');
    const part = await announce(other, `${path}/uploads/${upload_id}/parts/1`, SIX);
    expect(part.status).toBe(404);
    expect(part.headers.get('location')).toBeNull();
  });

  it("an upload of one file used for another file, or from another database: 404 upload_not_found, no URL", async () => {
    const target = sha(randomBytes(8));
    const opened = await api(server, 'POST', `${blobPath(target)}/uploads`);
    const { upload_id } = (await opened.json()) as { upload_id: string };
    for (const path of [`${blobPath(sha(randomBytes(8)))}/uploads/${upload_id}/parts/1`, `${blobPath(target, 'db2')}/uploads/${upload_id}/parts/1`]) {
      const r = await announce(server, path, SIX);
      expect(r.status).toBe(404);
      expect(await code(r)).toBe('upload_not_found');
      expect(r.headers.get('location')).toBeNull();
    }
  });

  it('a redirected GET is a blob.read under the credential that asked for it', async () => {
    const r = await api(alice, 'GET', blobPath(hash));
    expect(r.status).toBe(307);
    const reads = (await activityOf(hash, 'blob.read')).filter((e) => e.actor_kind === 'end_user');
    expect(reads.length).toBeGreaterThanOrEqual(1);
  });

  it("a file alice sent straight to S3 is written to the activity log under alice, whoever settles it", async () => {
    await withoutNotifications(async () => {
      const mine = randomBytes(SIX);
      expect(await redirectedPut(alice, sha(mine), mine)).toBe(200);
      expect((await api(server, 'HEAD', blobPath(sha(mine)))).status).toBe(200); // the server key's read settles it
      const written = await activityOf(sha(mine), 'blob.write');
      expect(written).toHaveLength(1);
      expect(written[0].actor_kind).toBe('end_user');
    });
  }, 30_000);
});

describe('multipart: etags and parts', () => {
  it('a part number sent inline, then again through its redirect (a retry with the right size): complete with the etag S3 gave last', async () => {
    const parts = [randomBytes(SIX), randomBytes(1024)];
    const hash = sha(Buffer.concat(parts));
    const id = await open(hash);
    const small = await api(server, 'PUT', `${blobPath(hash)}/uploads/${id}/parts/1`, { body: randomBytes(4 * MiB) });
    expect(small.status).toBe(200);
    const first = await announce(server, `${blobPath(hash)}/uploads/${id}/parts/1`, SIX);
    expect(first.status).toBe(307);
    const sent = await fetch(first.headers.get('location')!, { method: 'PUT', body: parts[0] });
    expect(sent.status).toBe(200);
    const second = await api(server, 'PUT', `${blobPath(hash)}/uploads/${id}/parts/2`, { body: parts[1] });
    const done = await complete(hash, id, [{ part_number: 1, etag: sent.headers.get('etag')! }, { part_number: 2, etag: second.headers.get('etag')! }], SIX + 1024);
    expect(done.status, await done.clone().text()).toBe(201);
    expect(await wholeOrAbsent(hash)).toBe(true);
  }, 30_000);

  async function open(hash: string) {
    const r = await api(server, 'POST', `${blobPath(hash)}/uploads`);
    expect(r.status).toBe(201);
    return ((await r.json()) as { upload_id: string }).upload_id;
  }
  const complete = (hash: string, id: string, parts: { part_number: number; etag: string }[], size?: number) =>
    json(server, 'POST', `${blobPath(hash)}/uploads/${id}/complete`, { parts, ...(size === undefined ? {} : { size }) });

  it('complete naming S3 etags never uploaded: 400 invalid_part (no 500), and the upload can still be completed', async () => {
    const parts = [randomBytes(SIX), randomBytes(1024)];
    const hash = sha(Buffer.concat(parts));
    const id = await open(hash);
    // S3 answers InvalidPart for etags it never gave out; s3rver instead crashes reading a part file
    // that is not there, so S3's answer is played here.
    const forgedEtags = ['"0123456789abcdef0123456789abcdef"', '"fedcba9876543210fedcba9876543210"'];
    const send = s3.client.send.bind(s3.client);
    const spy = vi.spyOn(s3.client, 'send').mockImplementation((async (command: unknown, ...rest: unknown[]) => {
      if (command instanceof CompleteMultipartUploadCommand && command.input.MultipartUpload?.Parts?.some((p) => forgedEtags.includes(p.ETag ?? ''))) {
        throw Object.assign(new Error('One or more of the specified parts could not be found.'), { name: 'InvalidPart', $fault: 'client', $metadata: { httpStatusCode: 400 } });
      }
      return (send as (...a: unknown[]) => unknown)(command, ...rest);
    }) as never);
    try {
      const forged = await complete(hash, id, forgedEtags.map((etag, i) => ({ part_number: i + 1, etag })));
      expect(forged.status).toBe(400);
      expect(await code(forged)).toBe('invalid_part');
    } finally {
      spy.mockRestore();
    }

    const first = await announce(server, `${blobPath(hash)}/uploads/${id}/parts/1`, SIX);
    expect(first.status).toBe(307);
    const sent = await fetch(first.headers.get('location')!, { method: 'PUT', body: parts[0] });
    expect(sent.status).toBe(200);
    const second = await api(server, 'PUT', `${blobPath(hash)}/uploads/${id}/parts/2`, { body: parts[1] });
    expect(second.status).toBe(200);
    const done = await complete(hash, id, [{ part_number: 1, etag: sent.headers.get('etag')! }, { part_number: 2, etag: second.headers.get('etag')! }], SIX + 1024);
    expect(done.status).toBe(201);
    expect(await wholeOrAbsent(hash)).toBe(true);
  }, 30_000);

  it('a wrong announced size with redirected parts: 400 hash_mismatch, nothing visible', async () => {
    const parts = [randomBytes(SIX), randomBytes(1024)];
    const hash = sha(Buffer.concat(parts));
    const id = await open(hash);
    const first = await announce(server, `${blobPath(hash)}/uploads/${id}/parts/1`, SIX);
    const sent = await fetch(first.headers.get('location')!, { method: 'PUT', body: parts[0] });
    const second = await api(server, 'PUT', `${blobPath(hash)}/uploads/${id}/parts/2`, { body: parts[1] });
    const done = await complete(hash, id, [{ part_number: 1, etag: sent.headers.get('etag')! }, { part_number: 2, etag: second.headers.get('etag')! }], SIX + 1);
    expect(done.status).toBe(400);
    expect(await code(done)).toBe('hash_mismatch');
    expect(await wholeOrAbsent(hash)).toBe(false);
  }, 30_000);
});

describe('races', () => {
  it("the URL used again after the file was recorded, with other bytes of the same length: the file's bytes still hash to its name", async () => {
    const bytes = randomBytes(SIX);
    const hash = sha(bytes);
    const r = await announce(alice, blobPath(hash), SIX);
    expect(r.status).toBe(307);
    const url = r.headers.get('location')!;
    expect((await fetch(url, { method: 'PUT', body: bytes })).status).toBe(200);
    await bucket.delivered();
    expect(await wholeOrAbsent(hash)).toBe(true);
    // Within the URL's 15 minutes, the uploader (or whoever saw the URL) sends it again.
    await (await fetch(url, { method: 'PUT', body: randomBytes(SIX) }).catch(() => undefined))?.arrayBuffer();
    await bucket.delivered();
    expect(await download(server, hash)).toEqual({ status: 200, sha256: hash });
  }, 30_000);

  it('announcements whose bytes never came do not keep a read from settling the file that did (read-your-write)', async () => {
    const bytes = randomBytes(SIX);
    const hash = sha(bytes);
    await withoutNotifications(async () => {
      // Someone (a careless client's retries, or anyone allowed to upload who knows the hash) announces it many times and sends nothing.
      const urls: string[] = [];
      for (let i = 0; i < 40; i++) {
        const r = await announce(server, blobPath(hash), SIX);
        expect(r.status).toBe(307);
        urls.push(r.headers.get('location')!);
      }
      // The client's own URL is the one whose generation sorts last (the others then come first in the arrivals partition).
      const gen = (url: string) => new URL(url).pathname.split('.').at(-1)!;
      const own = urls.sort((a, b) => gen(a).localeCompare(gen(b))).at(-1)!;
      expect((await fetch(own, { method: 'PUT', body: bytes })).status).toBe(200);
      // Read-your-write: the HEAD right after finds the file, as it does without the stale announcements.
      expect((await api(server, 'HEAD', blobPath(hash))).status).toBe(200);
    });
  }, 30_000);

  it('two redirected PUTs of the same bytes at once: one file, one blob.write, one object', async () => {
    const bytes = randomBytes(SIX);
    const hash = sha(bytes);
    expect(await Promise.all([redirectedPut(server, hash, bytes), redirectedPut(server, hash, bytes)])).toEqual([200, 200]);
    await bucket.delivered();
    expect(await wholeOrAbsent(hash)).toBe(true);
    expect(await activityOf(hash, 'blob.write')).toHaveLength(1);
    expect(await objectsOf(hash)).toHaveLength(1);
  }, 30_000);

  it('a redirected PUT of the right bytes racing one of wrong bytes (same length): the file is the right bytes', async () => {
    const bytes = randomBytes(SIX);
    const hash = sha(bytes);
    await Promise.all([redirectedPut(server, hash, randomBytes(SIX)), redirectedPut(server, hash, bytes)]);
    await bucket.delivered();
    expect(await wholeOrAbsent(hash)).toBe(true);
    expect(await objectsOf(hash)).toHaveLength(1);
  }, 30_000);

  it('a redirected PUT racing a DELETE of the same file: whole or absent, never metadata without bytes', async () => {
    const bytes = randomBytes(SIX);
    const hash = sha(bytes);
    expect(await redirectedPut(server, hash, bytes)).toBe(200);
    await bucket.delivered();
    const [, del] = await Promise.all([redirectedPut(server, hash, bytes), api(server, 'DELETE', blobPath(hash))]);
    expect([204, 404]).toContain(del.status);
    await bucket.delivered();
    await wholeOrAbsent(hash);
  }, 30_000);

  it('a record write naming a file whose wrong bytes arrived (notification not yet in): refused, and the bytes deleted unseen', async () => {
    const bytes = randomBytes(SIX);
    const hash = sha(bytes);
    await withoutNotifications(async () => {
      expect(await redirectedPut(server, hash, randomBytes(SIX), 'db', SIX)).toBe(200);
      const r = await json(server, 'POST', '/v1/databases/db/collections/photos/records', { owner: 'bob', shared: true, file: hash });
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(await objectsOf(hash)).toEqual([]);
      expect(await wholeOrAbsent(hash)).toBe(false);
    });
  }, 30_000);

  it('settle racing settle (the notification and reads) and a record write: one record, one blob.write', async () => {
    const bytes = randomBytes(SIX);
    const hash = sha(bytes);
    let event: S3Event | undefined;
    await withoutNotifications(async () => {
      s3.onEvent((e) => {
        if (!event && e.Records.some((r) => r.s3.object.key.includes(hash))) event = e as unknown as S3Event;
      });
      expect(await redirectedPut(server, hash, bytes)).toBe(200);
      await vi.waitFor(() => expect(event).toBeDefined());
      const [settled, head, record, head2] = await Promise.all([
        settleNotification(event!),
        api(server, 'HEAD', blobPath(hash)),
        json(server, 'POST', '/v1/databases/db/collections/photos/records', { owner: 'bob', shared: true, file: hash }),
        api(server, 'HEAD', blobPath(hash)),
      ]);
      expect(settled.settled).toBeLessThanOrEqual(1);
      expect([head.status, head2.status]).toEqual([200, 200]);
      expect(record.status).toBe(201);
    });
    expect(await activityOf(hash, 'blob.write')).toHaveLength(1);
    expect(await wholeOrAbsent(hash)).toBe(true);
  }, 30_000);

});

describe('announcements nobody follows', () => {
  it(`one file announced ${MAX_OPEN_ARRIVALS} times without its bytes: the next announcement is 429 with no URL, and once one is sent another is taken`, async () => {
    const bytes = randomBytes(SIX);
    const hash = sha(bytes);
    await withoutNotifications(async () => {
      const urls: string[] = [];
      for (let i = 0; i < MAX_OPEN_ARRIVALS; i++) {
        const r = await announce(server, blobPath(hash), SIX);
        expect(r.status).toBe(307);
        urls.push(r.headers.get('location')!);
      }
      const refused = await announce(server, blobPath(hash), SIX);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('location')).toBeNull();
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
      // The bytes sent to one URL and settled by a read: that arrival is no longer open.
      expect((await fetch(urls[0], { method: 'PUT', body: bytes })).status).toBe(200);
      expect((await api(server, 'HEAD', blobPath(hash))).status).toBe(200);
      expect((await announce(server, blobPath(hash), SIX)).status).toBe(307);
    });
  }, 60_000);
});

describe('ids that name object prototypes', () => {
  it.each(['__proto__', 'constructor'])('a database named %s: a redirected PUT is recorded and read back', async (db) => {
    const bytes = randomBytes(SIX);
    const hash = sha(bytes);
    expect(await redirectedPut(server, hash, bytes, db)).toBe(200);
    await bucket.delivered();
    expect(await wholeOrAbsent(hash, db)).toBe(true);
    expect(({} as Record<string, unknown>).size).toBeUndefined();
  }, 30_000);

  it('prototype names where an upload id, a part number or a file name is parsed: 4xx, no URL', async () => {
    const hash = sha(randomBytes(8));
    const opened = await api(server, 'POST', `${blobPath(hash)}/uploads`);
    const { upload_id } = (await opened.json()) as { upload_id: string };
    const tries: [string, number, string][] = [
      [`${blobPath(hash)}/uploads/__proto__/parts/1`, 404, 'upload_not_found'],
      [`${blobPath(hash)}/uploads/constructor/parts/1`, 404, 'upload_not_found'],
      [`${blobPath(hash)}/uploads/${upload_id}/parts/__proto__`, 400, 'invalid_part'],
      [`${blobPath(hash)}/uploads/${upload_id}/parts/constructor`, 400, 'invalid_part'],
      [blobPath('__proto__'), 400, 'invalid_name'],
      [blobPath('constructor'), 400, 'invalid_name'],
    ];
    for (const [path, status, expected] of tries) {
      const r = await announce(server, path, SIX);
      expect({ path, status: r.status, code: await code(r), location: r.headers.get('location') }).toEqual({ path, status, code: expected, location: null });
    }
  });

  it('crafted bucket notifications: ignored or settled, never thrown, nothing polluted', async () => {
    const h = 'a'.repeat(64);
    const keys = [
      `blobs/__proto__/__proto__/${h}.00`,
      `blobs/${orgId}/constructor/${h}.ff`,
      `blobs/${orgId}/db/${h}.%E0%A4%A`,
      `blobs/${orgId}/%25E0%25A4%25A/${h}.00`,
      `blobs/${orgId}/db/${h}`,
      `blobs/${orgId}/db/${h}.00/extra`,
      '',
    ];
    const event = { Records: [...keys.map((key) => ({ s3: { object: { key } } })), {}, { s3: {} }] } as unknown as S3Event;
    expect(await settleNotification(event)).toEqual({ settled: 0 });
    expect(await settleNotification({} as S3Event)).toEqual({ settled: 0 });
    expect(({} as Record<string, unknown>).gen).toBeUndefined();
  });
});

describe('the upload relay', () => {
  /** A stand-in for the Data API: records what reached it; `mode` says how it answers. */
  let mode: 'redirect' | 'fail' | 'drop' | 'hang' = 'redirect';
  const reached: IncomingMessage[] = [];
  const origin = createServer((req, res) => {
    reached.push(req);
    req.resume();
    if (mode === 'redirect') return void res.writeHead(307, { location: 'https://bucket.example/x' }).end();
    if (mode === 'fail') return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"message":"Internal Server Error"}');
    if (mode === 'drop') return void req.socket.destroy();
    // hang: never answers
  });
  let port = 0;
  beforeAll(async () => {
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    port = (origin.address() as AddressInfo).port;
  });
  afterAll(async () => {
    origin.closeAllConnections();
    await new Promise<void>((resolve) => origin.close(() => resolve()));
  });

  function event(method: string, uri: string, headers: Record<string, string>): CloudFrontRequestEvent {
    const cf: Record<string, { key: string; value: string }[]> = {};
    for (const [k, v] of Object.entries(headers)) cf[k.toLowerCase()] = [{ key: k, value: v }];
    const request = {
      clientIp: '127.0.0.1',
      method,
      uri,
      querystring: '',
      headers: cf,
      origin: { custom: { domainName: '127.0.0.1', port, protocol: 'http', path: '', sslProtocols: [], readTimeout: 30, keepaliveTimeout: 5, customHeaders: {} } },
    };
    return { Records: [{ cf: { config: { distributionDomainName: 'edge.test', distributionId: 'EDGE', eventType: 'origin-request', requestId: 'r' }, request } }] } as unknown as CloudFrontRequestEvent;
  }
  const big = String(SIX);
  const file = `/v1/databases/db/blobs/${'b'.repeat(64)}`;

  it('CloudFront sends it only PUTs that are file routes: every route its path pattern matches takes a file body or no PUT', () => {
    const pattern = new RegExp(`^${FILE_PATH_PATTERN.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
    for (const route of ROUTES.filter((r) => r.api === 'data' && r.method === 'PUT')) {
      // Parameters filled with a name that could itself read "blobs", to find a route the pattern catches by accident.
      for (const fill of ['x', 'blobs']) {
        const path = route.path.replace(/\{[^}]+\}/g, fill);
        if (pattern.test(path)) expect(route.body, `${route.id} (${path}) is matched by ${FILE_PATH_PATTERN}`).toBe('stream');
      }
    }
  });

  it.each(['GET', 'HEAD', 'POST', 'DELETE', 'OPTIONS', 'PATCH'])('%s with a huge Content-Length goes on untouched', async (method) => {
    const req = event(method, file, { 'Content-Length': big });
    expect(await uploadRelay(req)).toBe(req.Records[0].cf.request);
  });

  it('a PUT with a malformed or small Content-Length goes on untouched (API Gateway then applies its own limit)', async () => {
    for (const value of ['1e9', '-1', '12345678901234567', String(LAMBDA_MAX_BODY_BYTES)]) {
      const req = event('PUT', file, { 'Content-Length': value });
      expect(await uploadRelay(req)).toBe(req.Records[0].cf.request);
    }
  });

  it('hop-by-hop and body headers are not passed on, the credential and an announcement of the real size are', async () => {
    mode = 'redirect';
    reached.length = 0;
    const out = (await uploadRelay(
      event('PUT', file, {
        'Content-Length': big,
        Authorization: 'Bearer k',
        Connection: 'keep-alive, x-secret',
        'Keep-Alive': 'timeout=5',
        'Transfer-Encoding': 'chunked',
        Expect: '100-continue',
        TE: 'trailers',
        Upgrade: 'h2c',
        Trailer: 'x-checksum',
        'Proxy-Connection': 'keep-alive',
        'Upload-Length': '1',
      }),
    )) as CloudFrontResultResponse;
    expect(out.status).toBe('307');
    expect(out.headers?.location?.[0].value).toBe('https://bucket.example/x');
    expect(reached).toHaveLength(1);
    const h = reached[0].headers;
    expect(h['upload-length']).toBe(big);
    expect(h.authorization).toBe('Bearer k');
    for (const name of ['transfer-encoding', 'expect', 'te', 'upgrade', 'trailer', 'keep-alive']) expect(h[name], name).toBeUndefined();
    expect(h['content-length'] ?? '0').toBe('0');
  });

  it('an origin answering 500: the client gets that answer, no stack trace', async () => {
    mode = 'fail';
    const out = (await uploadRelay(event('PUT', file, { 'Content-Length': big }))) as CloudFrontResultResponse;
    expect(out.status).toBe('500');
    expect(out.body).not.toMatch(/\bat .*\(.*:\d+:\d+\)/);
  });

  it('an origin dropping the connection: 503 service_unavailable in the platform shape', async () => {
    mode = 'drop';
    const out = (await uploadRelay(event('PUT', file, { 'Content-Length': big }))) as CloudFrontResultResponse;
    expect(out.status).toBe('503');
    expect(JSON.parse(out.body!).error.code).toBe('service_unavailable');
  });

  it('an origin that hangs: 503 within the relay timeout (shortened here)', async () => {
    mode = 'hang';
    const real = AbortSignal.timeout.bind(AbortSignal);
    const spy = vi.spyOn(AbortSignal, 'timeout').mockImplementation(() => real(200));
    try {
      const out = (await uploadRelay(event('PUT', file, { 'Content-Length': big }))) as CloudFrontResultResponse;
      expect(out.status).toBe('503');
      expect(JSON.parse(out.body!).error.code).toBe('service_unavailable');
    } finally {
      spy.mockRestore();
      origin.closeAllConnections();
    }
  });
});
