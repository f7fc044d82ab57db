/**
 * Files (spec 4.17 to 4.19) through the local server with a real HTTP client: single PUT streamed
 * (never buffered), download streamed, HEAD, DELETE, multipart uploads, and who may do what.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { issueToken } from '../../lambdas/auth/tokens.js';

const MiB = 1024 * 1024;
const ORIGIN = 'https://files.example';

let p: TestPlatform;
let key: string; // organization-wide secret key
let appKey: string; // secret key bound to the web application
let publishable: string;
let endUser: string;
let otherOrgKey: string;

beforeAll(async () => {
  p = await startTestPlatform();
  key = p.credentials.secret_key;
  const t = new Tenants(p.engine.kv, () => Date.now());
  const app = await t.createApplication(p.credentials.workspace_id, 'web', []);
  appKey = (await t.createSecretKey(p.credentials.organization_id, app.id)).key;
  publishable = (await new PublishableKeys(p.engine.kv, () => Date.now()).create(app.id, [ORIGIN])).key;
  endUser = (
    await issueToken(p.engine, { kind: 'end_user', subject: 'user-1', organizationId: p.credentials.organization_id, applicationId: app.id, workspaceId: p.credentials.workspace_id }, 3600)
  ).token;
  const other = await t.createOrganization('other');
  otherOrgKey = (await t.createSecretKey(other.id)).key;
  for (const [k, db] of [[key, 'files'], [key, 'second'], [appKey, 'web'], [otherOrgKey, 'files']] as const) {
    const res = await fetch(`${p.urls.data}/v1/databases/${db}`, { method: 'PUT', headers: bearer(k) });
    expect(res.status).toBe(201);
  }
});
afterAll(async () => p?.close());

const sha = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');
const blobUrl = (db: string, hash: string, rest = '') => `${p.urls.data}/v1/databases/${db}/blobs/${hash}${rest}`;
const putBlob = (k: string, db: string, data: Buffer, hash = sha(data), headers: Record<string, string> = {}) =>
  fetch(blobUrl(db, hash), { method: 'PUT', headers: { ...bearer(k), ...headers }, body: data });
const getBlob = (k: string, db: string, hash: string, headers: Record<string, string> = {}) => fetch(blobUrl(db, hash), { headers: { ...bearer(k), ...headers } });

async function expectError(res: Response, status: number, code: string) {
  const body = (await res.json()) as any;
  expect({ status: res.status, code: body.error?.code }).toEqual({ status, code });
}

/** A body sent chunked (no Content-Length): a ReadableStream in fetch. */
function chunked(data: Buffer): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      controller.enqueue(data);
      controller.close();
    },
  });
}

/** A raw request whose declared Content-Length need not match what is sent (fetch always tells the truth). */
function rawPut(url: string, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'PUT', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') });
      });
    });
    req.on('error', reject);
    req.flushHeaders(); // headers only: the declared body never comes
  });
}

async function hashOf(res: Response): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    hash.update(chunk);
    size += chunk.byteLength;
  }
  return { sha256: hash.digest('hex'), size };
}

describe('PUT a file (4.17)', () => {
  it('stores with 201 {sha256, size}, answers 200 when already there, and GET gives the bytes back', async () => {
    const data = randomBytes(1000);
    const first = await putBlob(key, 'files', data);
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ sha256: sha(data), size: 1000 });
    const again = await putBlob(key, 'files', data);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ sha256: sha(data), size: 1000 });

    const got = await getBlob(key, 'files', sha(data));
    expect(got.status).toBe(200);
    expect(got.headers.get('content-type')).toBe('application/octet-stream');
    expect(got.headers.get('content-length')).toBe('1000');
    expect(got.headers.get('etag')).toBe(`"${sha(data)}"`);
    expect(Buffer.from(await got.arrayBuffer()).equals(data)).toBe(true);
  });

  it('refuses bytes that do not match the path with 400 hash_mismatch and keeps nothing', async () => {
    const data = randomBytes(2000);
    const claimed = sha(Buffer.from('something else'));
    await expectError(await putBlob(key, 'files', data, claimed), 400, 'hash_mismatch');
    await expectError(await getBlob(key, 'files', claimed), 404, 'blob_not_found');
    await expectError(await fetch(blobUrl('files', claimed), { method: 'DELETE', headers: bearer(key) }), 404, 'blob_not_found');
    // Neither under the bytes' own hash, nor as metadata.
    await expectError(await getBlob(key, 'files', sha(data)), 404, 'blob_not_found');
    expect(await p.engine.kv.query({ pk: `blobs#${p.credentials.organization_id}#files`, sk: { beginsWith: claimed } })).toEqual({ items: [] });
  });

  it('checks the bytes even when the file is already stored (200 path)', async () => {
    const data = randomBytes(300);
    expect((await putBlob(key, 'files', data)).status).toBe(201);
    const forged = Buffer.from(data);
    forged[0] ^= 1;
    await expectError(await putBlob(key, 'files', forged, sha(data)), 400, 'hash_mismatch');
  });

  it('answers 400 invalid_name for a path that is not 64 lowercase hex', async () => {
    const data = Buffer.from('x');
    for (const bad of [sha(data).toUpperCase(), sha(data).slice(1), 'not-a-hash', sha(data) + '0']) {
      await expectError(await putBlob(key, 'files', data, bad), 400, 'invalid_name');
    }
  });

  it('answers 411 length_required without Content-Length', async () => {
    const data = Buffer.from('chunked bytes');
    const res = await fetch(blobUrl('files', sha(data)), { method: 'PUT', headers: bearer(key), body: chunked(data), duplex: 'half' } as RequestInit);
    await expectError(res, 411, 'length_required');
  });

  it('answers 413 payload_too_large for a declared body over 100 MiB, before reading it', async () => {
    const res = await rawPut(blobUrl('files', sha(Buffer.from('big'))), { ...bearer(key), 'content-length': String(100 * MiB + 1) });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');
    // Exactly 100 MiB is allowed to start (no 413 up front): it fails later only for the missing bytes.
  });

  it('answers 404 database_not_found for a missing database, and 401 without a credential', async () => {
    const data = Buffer.from('nowhere');
    await expectError(await putBlob(key, 'missing', data), 404, 'database_not_found');
    await expectError(await fetch(blobUrl('files', sha(data)), { method: 'PUT', body: data }), 401, 'missing_credentials');
    await expectError(await putBlob('aik_' + '0'.repeat(64), 'files', data), 401, 'invalid_credentials');
  });

  it('streams a 30 MiB body from a generator without holding it in memory, and streams it back', async () => {
    const CHUNK = 256 * 1024;
    const COUNT = 120; // 30 MiB
    const chunkAt = (i: number) => {
      const b = Buffer.allocUnsafe(CHUNK);
      for (let j = 0; j < CHUNK; j += 4) b.writeUInt32LE((i * 2654435761 + j * 40503) >>> 0, j);
      return b;
    };
    const whole = createHash('sha256');
    for (let i = 0; i < COUNT; i++) whole.update(chunkAt(i));
    const hash = whole.digest('hex');

    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    let i = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (i < COUNT) controller.enqueue(chunkAt(i++));
        else controller.close();
      },
    });
    const res = await fetch(blobUrl('files', hash), {
      method: 'PUT',
      headers: { ...bearer(key), 'content-length': String(CHUNK * COUNT) },
      body,
      duplex: 'half',
    } as RequestInit);
    const uploadGrowth = peak - baseline;
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ sha256: hash, size: CHUNK * COUNT });

    peak = process.memoryUsage().rss;
    const downloadBase = peak;
    const got = await getBlob(key, 'files', hash);
    expect(got.status).toBe(200);
    expect(got.headers.get('content-length')).toBe(String(CHUNK * COUNT));
    expect(await hashOf(got)).toEqual({ sha256: hash, size: CHUNK * COUNT });
    const downloadGrowth = peak - downloadBase;
    clearInterval(sampler);
    console.info(`30 MiB upload: rss grew ${(uploadGrowth / MiB).toFixed(1)} MiB; download: ${(downloadGrowth / MiB).toFixed(1)} MiB`);
    // Client and server share this process, and streamed chunks are garbage V8 collects lazily, so this
    // is rough (25.5 MiB seen in a CI run). Buffering would keep the 30 MiB body alive at once plus its
    // 40 MiB base64 in an event: 70 MiB, well over this bound.
    expect(uploadGrowth).toBeLessThan(45 * MiB);
    // A download makes garbage on both sides (file chunks, then fetch's copies): 40 MiB still tells it
    // from a buffered answer, which holds the file, its base64 and the decoded copy (~100 MiB) at once.
    expect(downloadGrowth).toBeLessThan(40 * MiB);
  });
});

describe('HEAD and DELETE (4.18)', () => {
  it('HEAD answers the headers of the download and no body', async () => {
    const data = randomBytes(4321);
    await putBlob(key, 'files', data);
    const head = await fetch(blobUrl('files', sha(data)), { method: 'HEAD', headers: bearer(key) });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('4321');
    expect(head.headers.get('etag')).toBe(`"${sha(data)}"`);
    expect(head.headers.get('content-type')).toBe('application/octet-stream');
    expect(await head.text()).toBe('');
    const missing = await fetch(blobUrl('files', sha(Buffer.from('no such file'))), { method: 'HEAD', headers: bearer(key) });
    expect(missing.status).toBe(404);
  });

  it('DELETE answers 204, then the file is gone (404 blob_not_found), and a second DELETE is 404', async () => {
    const data = randomBytes(100);
    await putBlob(key, 'files', data);
    const del = await fetch(blobUrl('files', sha(data)), { method: 'DELETE', headers: bearer(key) });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe('');
    await expectError(await getBlob(key, 'files', sha(data)), 404, 'blob_not_found');
    await expectError(await fetch(blobUrl('files', sha(data)), { method: 'DELETE', headers: bearer(key) }), 404, 'blob_not_found');
    await expectError(await fetch(blobUrl('missing', sha(data)), { method: 'DELETE', headers: bearer(key) }), 404, 'database_not_found');
    // Stored again after a delete: 201, as new.
    expect((await putBlob(key, 'files', data)).status).toBe(201);
  });

  it('files are per database: the same bytes in another database are another file', async () => {
    const data = randomBytes(64);
    await putBlob(key, 'files', data);
    await expectError(await getBlob(key, 'second', sha(data)), 404, 'blob_not_found');
    expect((await putBlob(key, 'second', data)).status).toBe(201);
  });
});

describe('access', () => {
  it("another organization's key can neither read nor delete (404 database_not_found)", async () => {
    const data = randomBytes(50);
    await putBlob(key, 'files', data);
    // The other organization has its own database named "files": still not ours.
    await expectError(await getBlob(otherOrgKey, 'files', sha(data)), 404, 'blob_not_found');
    await expectError(await getBlob(otherOrgKey, 'second', sha(data)), 404, 'database_not_found');
    await expectError(await fetch(blobUrl('second', sha(data)), { method: 'DELETE', headers: bearer(otherOrgKey) }), 404, 'database_not_found');
    expect((await fetch(blobUrl('second', sha(data)), { method: 'HEAD', headers: bearer(otherOrgKey) })).status).toBe(404);
    expect((await getBlob(key, 'files', sha(data))).status).toBe(200);
  });

  it('an application-bound key does not see databases of the organization it did not create', async () => {
    const data = randomBytes(51);
    await putBlob(key, 'files', data);
    await expectError(await getBlob(appKey, 'files', sha(data)), 404, 'database_not_found');
  });

  it('a publishable key goes by collection rules: no blob collection admits it, so it reads nothing and uploads nothing', async () => {
    // Full coverage of files under rules: test/api/blob-rules.test.ts.
    const data = randomBytes(70);
    expect((await putBlob(appKey, 'web', data)).status).toBe(201);
    const browser = { origin: ORIGIN };
    const got = await getBlob(publishable, 'web', sha(data), browser);
    expect(got.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    await expectError(got, 404, 'blob_not_found'); // no record it may view references the file
    const other = randomBytes(70);
    await expectError(await putBlob(publishable, 'web', other, sha(other), browser), 403, 'forbidden');
    await expectError(await fetch(blobUrl('web', sha(data)), { method: 'DELETE', headers: { ...bearer(publishable), ...browser } }), 404, 'blob_not_found');
    await expectError(await fetch(blobUrl('web', sha(other), '/uploads'), { method: 'POST', headers: { ...bearer(publishable), ...browser } }), 403, 'forbidden');
    expect((await getBlob(appKey, 'web', sha(data))).status).toBe(200);
  });

  it("an end-user token uploads to its application's databases where a blob collection's rules admit it", async () => {
    const data = randomBytes(80);
    await expectError(await putBlob(endUser, 'web', data, sha(data), { origin: ORIGIN }), 403, 'forbidden');
    const collection = await fetch(`${p.urls.data}/v1/databases/web/collections/uploads`, {
      method: 'PUT',
      headers: { ...bearer(appKey), 'content-type': 'application/json' },
      body: JSON.stringify({ fields: [{ name: 'file', type: 'blob' }], rules: { view: 'users', create: 'users' } }),
    });
    expect(collection.status).toBe(201);
    expect((await putBlob(endUser, 'web', data, sha(data), { origin: ORIGIN })).status).toBe(201);
    await expectError(await getBlob(endUser, 'web', sha(data)), 404, 'blob_not_found'); // no record holds it yet
    await expectError(await putBlob(endUser, 'files', data), 404, 'database_not_found');
  });
});

describe('multipart uploads (4.19)', () => {
  const create = (db: string, hash: string, k = key) => fetch(blobUrl(db, hash, '/uploads'), { method: 'POST', headers: bearer(k) });
  const putPart = (db: string, hash: string, id: string, n: number | string, data: Buffer) =>
    fetch(blobUrl(db, hash, `/uploads/${id}/parts/${n}`), { method: 'PUT', headers: bearer(key), body: data });
  const complete = (db: string, hash: string, id: string, parts: { part_number: number; etag: string }[], extra: object = {}) =>
    fetch(blobUrl(db, hash, `/uploads/${id}/complete`), {
      method: 'POST',
      headers: { ...bearer(key), 'content-type': 'application/json' },
      body: JSON.stringify({ parts, ...extra }),
    });
  const abort = (db: string, hash: string, id: string) => fetch(blobUrl(db, hash, `/uploads/${id}`), { method: 'DELETE', headers: bearer(key) });

  async function start(db: string, hash: string): Promise<string> {
    const res = await create(db, hash);
    expect(res.status).toBe(201);
    const body = (await res.json()) as any;
    expect(body).toEqual({ upload_id: expect.stringMatching(/^upl_[0-9a-z]{26}$/) });
    return body.upload_id;
  }
  async function uploadParts(db: string, hash: string, id: string, parts: Buffer[]) {
    const out: { part_number: number; etag: string }[] = [];
    for (const [i, data] of parts.entries()) {
      const res = await putPart(db, hash, id, i + 1, data);
      expect(res.status).toBe(200);
      const body = (await res.json()) as any;
      expect(body).toEqual({ part_number: i + 1, size: data.length, etag: expect.any(String) });
      out.push({ part_number: body.part_number, etag: body.etag });
    }
    return out;
  }

  it('3 parts (5 MiB, 5 MiB, 1 MiB): 201 {sha256, size}, GET gives the whole file, a new upload answers 200 exists', async () => {
    const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(1 * MiB)];
    const whole = Buffer.concat(parts);
    const hash = sha(whole);
    const id = await start('files', hash);
    const listed = await uploadParts('files', hash, id, parts);
    const done = await complete('files', hash, id, listed, { size: whole.length });
    expect(done.status).toBe(201);
    expect(await done.json()).toEqual({ sha256: hash, size: 11 * MiB });
    expect(await hashOf(await getBlob(key, 'files', hash))).toEqual({ sha256: hash, size: 11 * MiB });

    const again = await create('files', hash);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ sha256: hash, exists: true });
    // The upload is used up.
    await expectError(await complete('files', hash, id, listed), 404, 'upload_not_found');
  });

  it('refuses a wrong etag or parts out of order with 400 invalid_part, and the upload stays usable', async () => {
    const parts = [randomBytes(5 * MiB), randomBytes(100)];
    const hash = sha(Buffer.concat(parts));
    const id = await start('files', hash);
    const listed = await uploadParts('files', hash, id, parts);
    await expectError(await complete('files', hash, id, [listed[0], { ...listed[1], etag: 'f'.repeat(64) }]), 400, 'invalid_part');
    await expectError(await complete('files', hash, id, [listed[1], listed[0]]), 400, 'invalid_part');
    await expectError(await complete('files', hash, id, [listed[0], listed[0]]), 400, 'invalid_part');
    await expectError(await complete('files', hash, id, [listed[0], { part_number: 3, etag: listed[1].etag }]), 400, 'invalid_part');
    await expectError(await complete('files', hash, id, listed, { size: 1 }), 400, 'hash_mismatch');
    expect((await complete('files', hash, id, listed)).status).toBe(201);
  });

  it('refuses a middle part under 5 MiB with 400 part_too_small', async () => {
    const parts = [randomBytes(1 * MiB), randomBytes(1 * MiB)];
    const hash = sha(Buffer.concat(parts));
    const id = await start('files', hash);
    const listed = await uploadParts('files', hash, id, parts);
    await expectError(await complete('files', hash, id, listed), 400, 'part_too_small');
    // A single part may be small: it is the last.
    const one = await start('files', sha(parts[0]));
    const [only] = await uploadParts('files', sha(parts[0]), one, [parts[0]]);
    expect((await complete('files', sha(parts[0]), one, [only])).status).toBe(201);
  });

  it('checks the whole file: 400 hash_mismatch keeps nothing and uses the upload up', async () => {
    const claimed = sha(Buffer.from('the real file'));
    const id = await start('files', claimed);
    const listed = await uploadParts('files', claimed, id, [randomBytes(1000)]);
    await expectError(await complete('files', claimed, id, listed), 400, 'hash_mismatch');
    await expectError(await getBlob(key, 'files', claimed), 404, 'blob_not_found');
    await expectError(await complete('files', claimed, id, listed), 404, 'upload_not_found');
  });

  it('abort answers 204; then parts and complete are 404 upload_not_found', async () => {
    const data = randomBytes(1000);
    const hash = sha(data);
    const id = await start('files', hash);
    const listed = await uploadParts('files', hash, id, [data]);
    expect((await abort('files', hash, id)).status).toBe(204);
    await expectError(await complete('files', hash, id, listed), 404, 'upload_not_found');
    await expectError(await putPart('files', hash, id, 2, data), 404, 'upload_not_found');
    await expectError(await abort('files', hash, id), 404, 'upload_not_found');
    await expectError(await getBlob(key, 'files', hash), 404, 'blob_not_found');
  });

  it('an upload id is unknown in another database, for another file, and to another organization', async () => {
    const data = randomBytes(1000);
    const hash = sha(data);
    const id = await start('files', hash);
    await expectError(await putPart('second', hash, id, 1, data), 404, 'upload_not_found');
    await expectError(await complete('second', hash, id, [{ part_number: 1, etag: 'x' }]), 404, 'upload_not_found');
    await expectError(await abort('second', hash, id), 404, 'upload_not_found');
    await expectError(await putPart('files', sha(Buffer.from('other')), id, 1, data), 404, 'upload_not_found');
    await expectError(await putPart('files', hash, 'upl_nonsense', 1, data), 404, 'upload_not_found');
    const foreign = await fetch(blobUrl('files', hash, `/uploads/${id}/parts/1`), { method: 'PUT', headers: bearer(otherOrgKey), body: data });
    await expectError(foreign, 404, 'upload_not_found'); // its own "files" database has no such upload
    expect((await abort('files', hash, id)).status).toBe(204);
  });

  it('part numbers are 1 to 10,000 (400 invalid_part); a part needs Content-Length (411)', async () => {
    const data = randomBytes(10);
    const hash = sha(data);
    const id = await start('files', hash);
    for (const n of ['0', '10001', 'abc', '01', '-1', '1.5']) {
      await expectError(await putPart('files', hash, id, n, data), 400, 'invalid_part');
    }
    expect((await putPart('files', hash, id, 10000, data)).status).toBe(200);
    const res = await fetch(blobUrl('files', hash, `/uploads/${id}/parts/1`), { method: 'PUT', headers: bearer(key), body: chunked(data), duplex: 'half' } as RequestInit);
    await expectError(res, 411, 'length_required');
    const big = await rawPut(blobUrl('files', hash, `/uploads/${id}/parts/1`), { ...bearer(key), 'content-length': String(100 * MiB + 1) });
    expect([big.status, big.body.error.code]).toEqual([413, 'payload_too_large']);
  });

  it('create answers 400 invalid_name, 404 database_not_found, 401 without a credential', async () => {
    await expectError(await create('files', 'ABC'), 400, 'invalid_name');
    await expectError(await create('missing', sha(Buffer.from('a'))), 404, 'database_not_found');
    await expectError(await fetch(blobUrl('files', sha(Buffer.from('a')), '/uploads'), { method: 'POST' }), 401, 'missing_credentials');
  });
});
