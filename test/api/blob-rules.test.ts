/**
 * Files under collection rules (docs/data/blobs.md, "Rules") through the local
 * server: browser credentials (publishable keys, end-user tokens) read a file only through a record
 * they may view, delete one only when they may update every record referencing it, and upload only
 * where a collection with a blob field may let them create or update records. The reverse lookup
 * follows record creates, updates, deletes, batches and field drops.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { indexPartition } from '../../lambdas/data/keys.js';
import { SEP } from '../../lambdas/data/schema.js';
import { callApi, expectError, type Res } from '../helpers/data-api.js';

const ORIGIN = 'https://photos.example';
/** Collections with blob fields whose rules admit publishable keys to uploads (create is an expression). */
const PICS = 'pics';
/** Blob collections whose create and update rules say `users`: closed to publishable keys. */
const LOCKED = 'locked';

let p: TestPlatform;
let server: Record<string, string>;
let pub: Record<string, string>;
let alice: Record<string, string>;
let bob: Record<string, string>;

const call = (cred: Record<string, string>, method: string, path: string, body?: unknown) => callApi(p.urls.data, cred, method, path, body);
const recs = (collection: string, db = PICS) => `/v1/databases/${db}/collections/${collection}/records`;
const blobPath = (hash: string, db = PICS, rest = '') => `/v1/databases/${db}/blobs/${hash}${rest}`;
const sha = (data: Buffer) => createHash('sha256').update(data).digest('hex');

async function putFile(cred: Record<string, string>, data = randomBytes(64), db = PICS): Promise<{ hash: string; res: Response }> {
  const res = await fetch(`${p.urls.data}${blobPath(sha(data), db)}`, { method: 'PUT', headers: cred, body: data });
  return { hash: sha(data), res };
}
async function stored(data = randomBytes(64), db = PICS): Promise<string> {
  const { hash, res } = await putFile(server, data, db);
  expect(res.status).toBe(201);
  return hash;
}
/** GET of a file: the bytes on 200 are not JSON, error answers are. */
async function read(cred: Record<string, string>, hash: string, db = PICS): Promise<Res> {
  const res = await fetch(`${p.urls.data}${blobPath(hash, db)}`, { headers: cred });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body: res.status === 200 ? bytes : JSON.parse(bytes.toString()) };
}
const head = async (cred: Record<string, string>, hash: string) => (await fetch(`${p.urls.data}${blobPath(hash)}`, { method: 'HEAD', headers: cred })).status;
const remove = (cred: Record<string, string>, hash: string) => call(cred, 'DELETE', blobPath(hash));

async function create(collection: string, data: Record<string, unknown>, cred = server, db = PICS): Promise<any> {
  const r = await call(cred, 'POST', recs(collection, db), data);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}
async function ok(r: Res | Promise<Res>, status = 200) {
  const res = await r;
  expect(res.status, JSON.stringify(res.body)?.slice(0, 300)).toBe(status);
  return res;
}

const PHOTO_RULES = {
  list: 'shared = true || owner = @auth.id',
  view: 'shared = true || owner = @auth.id',
  create: '@request.owner = @auth.id',
  update: 'owner = @auth.id',
  delete: 'owner = @auth.id',
};

beforeAll(async () => {
  p = await startTestPlatform();
  const t = new Tenants(p.engine.kv, () => Date.now());
  const app = await t.createApplication(p.credentials.workspace_id, 'photos', []);
  server = bearer((await t.createSecretKey(p.credentials.organization_id, app.id)).key);
  pub = { ...bearer((await new PublishableKeys(p.engine.kv, () => Date.now()).create(app.id, [ORIGIN])).key), origin: ORIGIN };
  const mint = async (user_id: string) => bearer((await ok(call(server, 'POST', '/v1/end-user-tokens', { user_id }))).body.token);
  alice = await mint('alice');
  bob = await mint('bob');
  for (const db of [PICS, LOCKED]) await ok(call(server, 'PUT', `/v1/databases/${db}`), 201);
  const photoFields = [
    { name: 'owner', type: 'text' },
    { name: 'shared', type: 'bool' },
    { name: 'file', type: 'blob' },
  ];
  await ok(call(server, 'PUT', `/v1/databases/${PICS}/collections/photos`, { fields: photoFields, rules: PHOTO_RULES }), 201);
  await ok(call(server, 'PUT', `/v1/databases/${PICS}/collections/albums`, { fields: [{ name: 'cover', type: 'blob' }], rules: { view: 'public' } }), 201);
  await ok(call(server, 'PUT', `/v1/databases/${LOCKED}/collections/docs`, { fields: [{ name: 'file', type: 'blob' }], rules: { view: 'public', create: 'users', update: 'users' } }), 201);
  // A collection without a blob field admits nothing to files, however open its rules.
  await ok(call(server, 'PUT', `/v1/databases/${LOCKED}/collections/notes`, { mode: 'free', rules: { create: 'public', update: 'public' } }), 201);
});
afterAll(async () => p?.close());

describe('reading a file (GET, HEAD)', () => {
  it('answers a publishable key 404 blob_not_found for a file only hidden records reference, 200 once a viewable record does', async () => {
    const data = randomBytes(100);
    const hash = await stored(data);
    await create('photos', { owner: 'alice', shared: false, file: hash });
    expectError(await read(pub, hash), 404, 'blob_not_found');
    expect(await head(pub, hash)).toBe(404);
    // The owner sees her record, so her file; bob sees neither.
    await ok(read(alice, hash));
    expectError(await read(bob, hash), 404, 'blob_not_found');
    // The same answer as a file that does not exist: existence does not leak.
    expectError(await read(pub, sha(randomBytes(8))), 404, 'blob_not_found');

    await create('photos', { owner: 'bob', shared: true, file: hash });
    const res = await fetch(`${p.urls.data}${blobPath(hash)}`, { headers: pub });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(Buffer.from(await res.arrayBuffer()).equals(data)).toBe(true);
    expect(await head(pub, hash)).toBe(200);
    await ok(read(bob, hash));
  });

  it('server credentials read every file, referenced or not', async () => {
    const hash = await stored();
    await ok(read(server, hash));
    expectError(await read(pub, hash), 404, 'blob_not_found');
    expectError(await read(alice, hash), 404, 'blob_not_found');
  });
});

describe('deleting a file', () => {
  it('refuses an end user a file referenced by a record they may not update, and keeps the file', async () => {
    const hash = await stored();
    await create('photos', { owner: 'alice', file: hash }, alice);
    await create('photos', { owner: 'bob', shared: true, file: hash });
    // Alice may view both records but update only hers.
    expectError(await remove(alice, hash), 403, 'forbidden');
    await ok(read(server, hash));
    await ok(read(alice, hash));

    // Referenced only by a record she cannot even see: the file is not hers to know of.
    const hidden = await stored();
    await create('photos', { owner: 'bob', file: hidden });
    expectError(await remove(alice, hidden), 404, 'blob_not_found');
    expectError(await remove(pub, hidden), 404, 'blob_not_found');
    await ok(read(server, hidden));
  });

  it('lets an end user delete a file when every record referencing it is one they may update', async () => {
    const hash = await stored();
    await create('photos', { owner: 'alice', file: hash }, alice);
    await create('photos', { owner: 'alice', shared: true, file: hash }, alice);
    expectError(await remove(bob, hash), 403, 'forbidden'); // bob sees the shared one, updates neither
    expectError(await remove(pub, hash), 403, 'forbidden');
    await ok(remove(alice, hash), 204);
    expectError(await read(server, hash), 404, 'blob_not_found');
  });

  it('leaves a file no record references to server credentials: browsers get 404, the server deletes it', async () => {
    // Alice uploads (photos' create rule may let her), but until a record holds the file it grants nothing.
    const { hash, res } = await putFile(alice);
    expect(res.status).toBe(201);
    expectError(await read(alice, hash), 404, 'blob_not_found');
    expectError(await remove(alice, hash), 404, 'blob_not_found');
    expectError(await remove(pub, hash), 404, 'blob_not_found');
    await ok(read(server, hash));

    await create('photos', { owner: 'alice', file: hash }, alice);
    await ok(read(alice, hash));
    expectError(await remove(bob, hash), 404, 'blob_not_found');

    const loose = await stored();
    await ok(remove(server, loose), 204);
    expectError(await read(server, loose), 404, 'blob_not_found');
  });
});

describe('uploading a file', () => {
  it('refuses a publishable key where no blob collection’s create or update rule admits it, and lets it upload where one does', async () => {
    const data = randomBytes(90);
    const locked = await putFile(pub, data, LOCKED);
    expectError({ status: locked.res.status, headers: locked.res.headers, body: await locked.res.json() }, 403, 'forbidden');
    expectError(await call(pub, 'POST', blobPath(sha(data), LOCKED, '/uploads')), 403, 'forbidden');
    expectError(await call(server, 'GET', blobPath(sha(data), LOCKED)), 404, 'blob_not_found'); // nothing kept
    // End users pass `users`; the server passes everything.
    expect((await putFile(alice, data, LOCKED)).res.status).toBe(201);
    expect((await putFile(server, randomBytes(20), LOCKED)).res.status).toBe(201);

    // photos' create rule is an expression: not closed to a publishable key, so it may upload there.
    const open = await putFile(pub, randomBytes(90), PICS);
    expect(open.res.status).toBe(201);
    const multipart = sha(randomBytes(30));
    const started = await ok(call(pub, 'POST', blobPath(multipart, PICS, '/uploads')), 201);
    await ok(call(pub, 'DELETE', blobPath(multipart, PICS, `/uploads/${started.body.upload_id}`)), 204);
  });
});

describe('the reverse lookup follows record writes', () => {
  it('moves the grant with a blob value that changes, and drops it when the value is unset', async () => {
    const x = await stored();
    const y = await stored();
    const photo = await create('photos', { owner: 'bob', shared: true, file: x });
    await ok(read(pub, x));
    expectError(await read(pub, y), 404, 'blob_not_found');
    await ok(call(server, 'PATCH', `${recs('photos')}/${photo.id}`, { file: y }));
    expectError(await read(pub, x), 404, 'blob_not_found');
    await ok(read(pub, y));
    // A change that makes the record hidden takes the grant with it.
    await ok(call(server, 'PATCH', `${recs('photos')}/${photo.id}`, { shared: false }));
    expectError(await read(pub, y), 404, 'blob_not_found');
    await ok(call(server, 'PATCH', `${recs('photos')}/${photo.id}`, { shared: true, file: null }));
    expectError(await read(pub, y), 404, 'blob_not_found');
  });

  it('drops the grant when the record is deleted', async () => {
    const hash = await stored();
    const photo = await create('photos', { owner: 'bob', shared: true, file: hash });
    await ok(read(pub, hash));
    await ok(call(bob, 'DELETE', `${recs('photos')}/${photo.id}`), 204);
    expectError(await read(pub, hash), 404, 'blob_not_found');
    // With no record left, bob may not delete the file any more either.
    expectError(await remove(bob, hash), 404, 'blob_not_found');
  });

  it('keeps the lookup through batches', async () => {
    const a = await stored();
    const b = await stored();
    const batch = (ops: unknown[]) => call(server, 'POST', `/v1/databases/${PICS}/batch`, { ops });
    await ok(batch([
      { op: 'create', collection: 'photos', id: 'batch-1', data: { owner: 'bob', shared: true, file: a } },
      { op: 'create', collection: 'albums', id: 'batch-2', data: { cover: b } },
    ]));
    await ok(read(pub, a));
    await ok(read(pub, b));
    await ok(batch([
      { op: 'update', collection: 'photos', id: 'batch-1', data: { file: b } },
      { op: 'delete', collection: 'albums', id: 'batch-2' },
    ]));
    expectError(await read(pub, a), 404, 'blob_not_found');
    await ok(read(pub, b));
  });

  it('drops the grant with the field: a collection PUT without the blob field, and re-adding it starts clean', async () => {
    const hash = await stored();
    await create('albums', { cover: hash });
    await ok(read(pub, hash));
    await ok(call(server, 'PUT', `/v1/databases/${PICS}/collections/albums`, { fields: [], rules: { view: 'public' } }));
    expectError(await read(pub, hash), 404, 'blob_not_found');
    await ok(call(server, 'PUT', `/v1/databases/${PICS}/collections/albums`, { fields: [{ name: 'cover', type: 'blob' }], rules: { view: 'public' } }));
    expectError(await read(pub, hash), 404, 'blob_not_found');
    await create('albums', { cover: hash });
    await ok(read(pub, hash));
  });

  it('grants nothing through a record without a lookup entry (written before entries existed) until it is written again', async () => {
    const hash = await stored();
    const photo = await create('photos', { owner: 'bob', shared: true, file: hash });
    await ok(read(pub, hash));
    // The collection was created at schema_version 1, so its `file` field is generation 1.
    const pk = indexPartition(p.credentials.organization_id, PICS, 'photos', 'file', 1);
    expect(await p.engine.kv.get({ pk, sk: hash + SEP + photo.id })).toBeDefined();
    await p.engine.kv.delete({ pk, sk: hash + SEP + photo.id });
    expectError(await read(pub, hash), 404, 'blob_not_found');
    await ok(call(server, 'PATCH', `${recs('photos')}/${photo.id}`, { owner: 'bob' }));
    await ok(read(pub, hash));
  });

  it('refuses filters, sorts and the indexed flag on blob fields as before', async () => {
    expectError(await call(server, 'GET', `${recs('photos')}?filter[file]=${'a'.repeat(64)}`), 400, 'invalid_query');
    expectError(await call(server, 'GET', `${recs('photos')}?sort=file`), 400, 'invalid_query');
    expectError(await call(server, 'PUT', `/v1/databases/${PICS}/collections/bad`, { fields: [{ name: 'f', type: 'blob', indexed: true }] }), 400, 'invalid_schema');
  });
});
