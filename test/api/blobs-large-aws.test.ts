/**
 * Files over the Lambda payload on the AWS engine (docs/data/blobs.md, "Large files on AWS"): the file
 * routes run as Lambda behind API Gateway runs them (test/helpers/lambda-front.ts: 10 MB at the door,
 * 6 MB an invocation, answers buffered), over DynamoDB (dynalite) and S3 (s3rver), with the bucket's
 * notifications delivered to the arrivals consumer as AWS would; the Data distribution's upload relay
 * (lambdas/edge/upload-relay.ts) runs in front of it as CloudFront runs an origin-request function
 * (test/helpers/cloudfront-edge.ts). Real clients: curl -L -T and fetch, unchanged.
 */
import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { Engine } from '../../lambdas/engine/ports.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { flushActivity } from '../../lambdas/activity/activity.js';
import { LAMBDA_MAX_BODY_BYTES } from '../../lambdas/http/event.js';
import { settleArrivals } from '../../lambdas/data/blobs.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import type { S3rverBucket } from '../helpers/s3rver.js';
import { deliverNotifications, type BucketNotifications } from '../helpers/bucket-notifications.js';
import { startLambdaFront, type LambdaFront } from '../helpers/lambda-front.js';
import { startEdgeFront, type EdgeFront } from '../helpers/cloudfront-edge.js';
import { handler as uploadRelay } from '../../lambdas/edge/upload-relay.js';

const run = promisify(execFile);
const MiB = 1024 * 1024;
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

let engine: Engine;
let s3: S3rverBucket;
let gateway: LambdaFront; // the Data API's execute-api URL: API Gateway and Lambda as they are
let edge: EdgeFront; // the Data distribution's URL: CloudFront with the upload relay, in front of the gateway
let key: string;
let orgId: string;
let dir: string;
let bucket: BucketNotifications;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  const started = await startAwsDataEngine('blobs-large');
  engine = started.engine;
  s3 = started.s3;
  useEngine(engine);
  bucket = deliverNotifications(s3);
  const tenants = new Tenants(engine.kv, () => Date.now());
  const org = await tenants.createOrganization('large');
  key = (await tenants.createSecretKey(org.id)).key;
  orgId = org.id;
  gateway = await startLambdaFront('data');
  edge = await startEdgeFront(gateway.url, uploadRelay);
  expect((await api(gateway, 'PUT', '/v1/databases/db')).status).toBe(201);
  dir = mkdtempSync(join(tmpdir(), 'blobs-large-'));
}, 60_000);

afterAll(async () => {
  await bucket.delivered();
  await gateway?.close();
  await edge?.close();
  await engine?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function api(front: { url: string }, method: string, path: string, init: { body?: Uint8Array | string | Blob; headers?: Record<string, string>; redirect?: 'manual' | 'follow' } = {}) {
  return fetch(front.url + path, { method, body: init.body, redirect: init.redirect ?? 'manual', headers: { authorization: `Bearer ${key}`, ...init.headers } });
}

/** curl -L -T as the docs tell users to send a file: `Expect: 100-continue` and the 307 followed with the body. */
async function curlPut(url: string, file: string): Promise<{ status: number; etag?: string }> {
  const { stdout } = await run('curl', ['-sS', '-L', '-T', file, '-H', `Authorization: Bearer ${key}`, '-D', '-', '-o', '/dev/null', url], { maxBuffer: MiB });
  const heads = stdout.split(/\r?\n\r?\n/).filter((h) => h.startsWith('HTTP/'));
  const last = heads.at(-1)!;
  return { status: Number(last.split(' ')[1]), etag: /^etag: (.*)$/im.exec(last)?.[1]?.trim() };
}

const blobPath = (hash: string) => `/v1/databases/db/blobs/${hash}`;

/** The two-step PUT of docs/data/blobs.md: announce the bytes (Upload-Length), get the 307, send them to its Location (S3's 200). */
async function sendStraight(bytes: Buffer, front: { url: string } = gateway): Promise<string> {
  const r = await api(front, 'PUT', blobPath(sha(bytes)), { headers: { 'upload-length': String(bytes.length) } });
  expect(r.status).toBe(307);
  expect((await fetch(r.headers.get('location')!, { method: 'PUT', body: bytes })).status).toBe(200);
  return sha(bytes);
}

async function activityOf(hash: string, kind: string) {
  await bucket.delivered();
  await flushActivity(engine);
  const r = await api(gateway, 'GET', `/v1/activity?kind=${kind}&file_sha256=${hash}`);
  expect(r.status).toBe(200);
  return ((await r.json()) as { items: Record<string, unknown>[] }).items;
}

describe('a 100 MiB file, unchanged clients', () => {
  const bytes = randomBytes(100 * MiB);
  const hash = sha(bytes);

  it('curl -L -T through the distribution: the relay gets the 307 from the route with the headers only, S3 takes the bytes, and the file is recorded once checked', async () => {
    const file = join(dir, 'big.bin');
    writeFileSync(file, bytes);
    const before = gateway.invocations.length;
    const put = await curlPut(edge.url + blobPath(hash), file);
    expect(put.status).toBe(200); // S3's answer to the redirected PUT
    // The one invocation carried no body.
    const calls = gateway.invocations.slice(before);
    expect(calls).toHaveLength(1);
    expect(calls[0].eventBytes).toBeLessThan(16 * 1024);

    const head = await api(gateway, 'HEAD', blobPath(hash));
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(100 * MiB));
    const written = await activityOf(hash, 'blob.write');
    expect(written).toHaveLength(1);
    expect(written[0].file_size).toBe(100 * MiB);
  }, 120_000);

  it('GET: 307 to a URL serving the bytes; fetch follows it and gets the whole file', async () => {
    const r = await api(gateway, 'GET', blobPath(hash));
    expect(r.status).toBe(307);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const location = r.headers.get('location')!;
    expect(location).toContain('X-Amz-Signature=');
    await r.body?.cancel();

    const followed = await api(gateway, 'GET', blobPath(hash), { redirect: 'follow' });
    expect(followed.status).toBe(200);
    const got = Buffer.from(await followed.arrayBuffer());
    expect(got.length).toBe(100 * MiB);
    expect(sha(got)).toBe(hash);
    expect((await activityOf(hash, 'blob.read')).length).toBeGreaterThanOrEqual(2);
  }, 120_000);

  it('fetch through the distribution, a Blob body: sent to the edge (dropped there), then again to the Location', async () => {
    const other = randomBytes(20 * MiB);
    const r = await api(edge, 'PUT', blobPath(sha(other)), { body: new Blob([other]), redirect: 'follow' });
    expect(r.status).toBe(200);
    expect((await api(edge, 'HEAD', blobPath(sha(other)))).status).toBe(200);
  }, 60_000);

  it('straight to API Gateway (its execute-api URL), the same PUT stops at the door (413): use the distribution or Upload-Length', async () => {
    const r = await api(gateway, 'PUT', blobPath(sha(Buffer.from('other'))), { body: bytes.subarray(0, 11 * MiB) });
    expect(r.status).toBe(413);
    expect(await r.json()).toEqual({ message: 'Request Entity Too Large' });
  });
});

describe('Upload-Length: the two-step PUT that works through any front', () => {
  it('announces 12 MiB with no body, gets 307, sends the bytes there; the file is then readable', async () => {
    const bytes = randomBytes(12 * MiB);
    const hash = sha(bytes);
    const r = await api(gateway, 'PUT', blobPath(hash), { headers: { 'upload-length': String(bytes.length) } });
    expect(r.status).toBe(307);
    const sent = await fetch(r.headers.get('location')!, { method: 'PUT', body: bytes });
    expect(sent.status).toBe(200);
    const head = await api(gateway, 'HEAD', blobPath(hash));
    expect(head.status).toBe(200);
    expect(head.headers.get('etag')).toBe(`"${hash}"`);
  }, 60_000);

  it('a small announced body has nowhere else to go: 411 length_required (bodies this small go inline)', async () => {
    const r = await api(gateway, 'PUT', blobPath(sha(Buffer.from('x'))), { headers: { 'upload-length': '1' } });
    expect(r.status).toBe(411);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('length_required');
  });

  it('small bodies keep the inline path: 201 {sha256, size} from the function itself', async () => {
    const bytes = randomBytes(MiB);
    const r = await api(gateway, 'PUT', blobPath(sha(bytes)), { body: bytes });
    expect(r.status).toBe(201);
    expect(await r.json()).toEqual({ sha256: sha(bytes), size: MiB });
  });

  it('refuses an announcement over 100 MiB (413) before any URL; a malformed one is no announcement (the empty body is checked)', async () => {
    const big = await api(gateway, 'PUT', blobPath(sha(Buffer.from('y'))), { headers: { 'upload-length': String(100 * MiB + 1) } });
    expect(big.status).toBe(413);
    expect(big.headers.get('location')).toBeNull();
    const malformed = await api(gateway, 'PUT', blobPath(sha(Buffer.from('z'))), { headers: { 'upload-length': 'many' } });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: { code: string } }).error.code).toBe('hash_mismatch');
  });
});

describe('wrong bytes sent to the URL', () => {
  it('are refused when settled: never visible, deleted, and the file can still be sent right', async () => {
    const bytes = randomBytes(6 * MiB);
    const hash = sha(bytes);
    const r = await api(gateway, 'PUT', blobPath(hash), { headers: { 'upload-length': String(bytes.length) } });
    expect(r.status).toBe(307);
    // The same length, other bytes (real S3 refuses them itself: the URL carries the checksum; s3rver does not).
    const wrong = randomBytes(bytes.length);
    expect((await fetch(r.headers.get('location')!, { method: 'PUT', body: wrong })).status).toBe(200);
    await bucket.delivered();

    expect((await api(gateway, 'HEAD', blobPath(hash))).status).toBe(404);
    expect((await api(gateway, 'GET', blobPath(hash))).status).toBe(404);
    const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket }));
    expect((listed.Contents ?? []).filter((o) => o.Key!.includes(hash))).toEqual([]);
    expect(await activityOf(hash, 'blob.write')).toEqual([]);

    await sendStraight(bytes);
    expect((await api(gateway, 'HEAD', blobPath(hash))).status).toBe(200);
  }, 60_000);
});

describe('without the notification (late or lost)', () => {
  it('the first read, or a record write naming the file, settles it', async () => {
    await bucket.withoutNotifications(async () => {
      const a = randomBytes(5 * MiB);
      await sendStraight(a);
      expect((await api(gateway, 'HEAD', blobPath(sha(a)))).status).toBe(200);

      const b = randomBytes(5 * MiB);
      await sendStraight(b);
      const put = await api(gateway, 'PUT', '/v1/databases/db/collections/docs', {
        body: JSON.stringify({ fields: [{ name: 'file', type: 'blob' }] }),
        headers: { 'content-type': 'application/json' },
      });
      expect([200, 201]).toContain(put.status);
      const created = await api(gateway, 'POST', '/v1/databases/db/collections/docs/records', {
        body: JSON.stringify({ file: sha(b) }),
        headers: { 'content-type': 'application/json' },
      });
      expect(created.status).toBe(201);
    });
  }, 60_000);
});

describe('settling races', () => {
  it('two settlers of one arrival record the file once: one blob.write, one metadata item', async () => {
    await bucket.withoutNotifications(async () => {
      const bytes = randomBytes(5 * MiB);
      const hash = sha(bytes);
      await sendStraight(bytes);
      const heads = await Promise.all([1, 2, 3].map(() => api(gateway, 'HEAD', blobPath(hash))));
      expect(heads.map((h) => h.status)).toEqual([200, 200, 200]);
      expect(await activityOf(hash, 'blob.write')).toHaveLength(1);
    });
  }, 60_000);

  it('a settler that lost the race never records the file again after a DELETE (no metadata without bytes)', async () => {
    await bucket.withoutNotifications(async () => {
      const bytes = randomBytes(5 * MiB);
      const hash = sha(bytes);
      await sendStraight(bytes);
      // A slow settler: it has measured the bytes, and waits before recording.
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      let measured!: () => void;
      const hasMeasured = new Promise<void>((resolve) => (measured = resolve));
      const slow: Engine = {
        ...engine,
        blobs: Object.assign(Object.create(engine.blobs), {
          describe: async (k: string) => {
            const d = await engine.blobs.describe!(k);
            measured();
            await gate;
            return d;
          },
        }),
      };
      const late = settleArrivals(slow, orgId, 'db', hash);
      await hasMeasured;
      expect((await api(gateway, 'HEAD', blobPath(hash))).status).toBe(200); // settled by the read
      expect((await api(gateway, 'DELETE', blobPath(hash))).status).toBe(204);
      open();
      await late;
      expect((await api(gateway, 'HEAD', blobPath(hash))).status).toBe(404);
      expect(await activityOf(hash, 'blob.write')).toHaveLength(1);
    });
  }, 60_000);

  it('a DELETE right after a redirected PUT finds the file (it settles first), and the bytes go with it', async () => {
    await bucket.withoutNotifications(async () => {
      const bytes = randomBytes(5 * MiB);
      const hash = sha(bytes);
      await sendStraight(bytes);
      expect((await api(gateway, 'DELETE', blobPath(hash))).status).toBe(204);
      expect((await api(gateway, 'HEAD', blobPath(hash))).status).toBe(404);
      const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket }));
      expect((listed.Contents ?? []).filter((o) => o.Key!.includes(hash))).toEqual([]);
    });
  }, 60_000);
});

describe('a multipart upload with parts over 10 MB', () => {
  it('3 parts (11, 11 and 3 MiB) sent to the URLs the part PUTs redirect to, joined by complete: 201, then a 307 GET of the whole', async () => {
    const parts = [randomBytes(11 * MiB), randomBytes(11 * MiB), randomBytes(3 * MiB)];
    const whole = Buffer.concat(parts);
    const hash = sha(whole);
    const opened = await api(gateway, 'POST', `${blobPath(hash)}/uploads`);
    expect(opened.status).toBe(201);
    const { upload_id } = (await opened.json()) as { upload_id: string };

    const etags: string[] = [];
    for (const [i, part] of parts.entries()) {
      const path = `${blobPath(hash)}/uploads/${upload_id}/parts/${i + 1}`;
      if (i === 0) {
        // curl -L -T through the distribution: the part never enters a function.
        const file = join(dir, 'part1.bin');
        writeFileSync(file, part);
        const sent = await curlPut(edge.url + path, file);
        expect(sent.status).toBe(200);
        etags.push(sent.etag!);
      } else if (part.length > LAMBDA_MAX_BODY_BYTES) {
        const r = await api(gateway, 'PUT', path, { headers: { 'upload-length': String(part.length) } });
        expect(r.status).toBe(307);
        const sent = await fetch(r.headers.get('location')!, { method: 'PUT', body: part });
        expect(sent.status).toBe(200);
        etags.push(sent.headers.get('etag')!);
      } else {
        // Small enough for the function: the inline answer, whose ETag header matches its JSON etag.
        const r = await api(gateway, 'PUT', path, { body: part });
        expect(r.status).toBe(200);
        const body = (await r.json()) as { etag: string };
        expect(r.headers.get('etag')).toBe(`"${body.etag}"`);
        etags.push(r.headers.get('etag')!);
      }
    }
    const completed = await api(gateway, 'POST', `${blobPath(hash)}/uploads/${upload_id}/complete`, {
      body: JSON.stringify({ parts: etags.map((etag, i) => ({ part_number: i + 1, etag })), size: whole.length }),
      headers: { 'content-type': 'application/json' },
    });
    expect(completed.status).toBe(201);
    expect(await completed.json()).toEqual({ sha256: hash, size: whole.length });

    const got = await api(gateway, 'GET', blobPath(hash), { redirect: 'follow' });
    expect(got.status).toBe(200);
    expect(sha(Buffer.from(await got.arrayBuffer()))).toBe(hash);
    expect((await activityOf(hash, 'blob.write')).length).toBe(1);
  }, 120_000);

  it('a part redirect needs an open upload of this file first (404 upload_not_found, no URL)', async () => {
    const r = await api(gateway, 'PUT', `${blobPath(sha(Buffer.from('q')))}/uploads/upl_00000000000000000000000000/parts/1`, { headers: { 'upload-length': String(6 * MiB) } });
    expect(r.status).toBe(404);
    expect(r.headers.get('location')).toBeNull();
  });
});

describe('what stays as it was', () => {
  it('a file under the Lambda payload is served inline (200 with the bytes), not redirected', async () => {
    const bytes = randomBytes(2 * MiB);
    expect((await api(gateway, 'PUT', blobPath(sha(bytes)), { body: bytes })).status).toBe(201);
    const r = await api(gateway, 'GET', blobPath(sha(bytes)));
    expect(r.status).toBe(200);
    expect(sha(Buffer.from(await r.arrayBuffer()))).toBe(sha(bytes));
  });

  it('a missing file is 404 blob_not_found, never a redirect', async () => {
    const r = await api(gateway, 'GET', blobPath('0'.repeat(64)));
    expect(r.status).toBe(404);
    expect(r.headers.get('location')).toBeNull();
  });

  it('the S3 object of a recorded file carries no staging or arrival leftovers', async () => {
    const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: '.staging/' }));
    expect((listed.Contents ?? []).filter((o) => (o.Size ?? 0) > 0)).toEqual([]);
  });
});
