/**
 * Uploads on the AI API through the local server with a real HTTP client (docs/ai/uploads.md): a
 * multi-part upload, resumed; the same id again; every refusal (operation_id_reused, hash_mismatch,
 * wrong part sizes, unknown and foreign ids, capability, workspace); one stored copy of the same bytes;
 * expiry and the sweep that removes the bytes, on a clock the test moves.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { postWithOperation } from '../helpers/ai-calls.js';
import { docBlocks } from '../helpers/doc-blocks.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import type { Clock } from '../../lambdas/engine/ports.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { storedFileKey, uploadBytesKey, uploadKey } from '../../lambdas/knowledge/upload-keys.js';

const MIB = 1024 * 1024;
/** Real time plus what the test adds: the server's sleeps and leases still run. */
let offsetMs = 0;
const clock: Clock = { now: () => systemClock.now() + offsetMs, sleep: systemClock.sleep };

let p: TestPlatform;
let org: string;
let key: string;
const tenants = () => new Tenants(p.engine.kv, () => p.engine.clock.now());

const op = () => `op-${randomUUID()}`;
const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const start = (body: object, id = op(), k = key) => postWithOperation(p.urls.ai, k, '/v1/uploads', id, body);
const complete = (id: string, k = key, opId = op(), body: object = {}) => postWithOperation(p.urls.ai, k, `/v1/uploads/${id}/complete`, opId, body);
const fileOf = (bytes: Buffer, extra: object = {}) => ({ filename: 'talk.mp4', content_type: 'video/mp4', size: bytes.length, sha256: sha(bytes), ...extra });

async function get(id: string, k = key) {
  const res = await fetch(`${p.urls.ai}/v1/uploads/${id}`, { headers: bearer(k) });
  return { status: res.status, body: (await res.json()) as any };
}

async function putPart(url: string, bytes: Buffer, k = key, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'PUT', body: bytes, headers: { ...bearer(k), 'x-operation-id': op(), ...headers } });
  return { status: res.status, etag: res.headers.get('etag'), body: (await res.json()) as any };
}

/** The bytes of part `n` (1-based) of `file` cut at `partSize`. */
const slice = (file: Buffer, partSize: number, n: number) => file.subarray((n - 1) * partSize, n * partSize);

beforeAll(async () => {
  p = await startTestPlatform({ clock });
  org = p.credentials.organization_id;
  key = p.credentials.secret_key;
});

afterAll(async () => {
  await p?.close();
});

describe('a multi-part upload', () => {
  const file = randomBytes(12 * MIB + 123);
  const id = op();

  it('starts: 201 with the upload, its part size and count, and where each part goes', async () => {
    const a = await start(fileOf(file), id);
    expect(a.status).toBe(201);
    expect(a.headers['x-operation-id']).toBe(id);
    expect(a.body).toEqual({
      id,
      object: 'upload',
      filename: 'talk.mp4',
      content_type: 'video/mp4',
      size: file.length,
      sha256: sha(file),
      status: 'pending',
      part_size: 5 * MIB,
      part_count: 3,
      parts_received: [],
      keep_source_hours: 24,
      created_at: expect.any(String),
      expires_at: expect.any(String),
      completed_at: null,
      parts: [1, 2, 3].map((n) => ({ number: n, url: `${p.urls.ai}/v1/uploads/${id}/parts/${n}`, method: 'PUT', size: n < 3 ? 5 * MIB : 2 * MIB + 123 })),
      part_urls_expire_at: null,
    });
    expect(Date.parse(a.body.expires_at) - Date.parse(a.body.created_at)).toBe(24 * 3600 * 1000);
  });

  it('is resumed: GET shows the parts received and lists only the missing ones', async () => {
    const { body: upload } = await get(id);
    for (const n of [3, 1]) {
      const part = await putPart(upload.parts[n - 1].url, slice(file, upload.part_size, n));
      expect(part.status).toBe(200);
      expect(part.body).toEqual({ part_number: n, size: upload.parts[n - 1].size, etag: expect.any(String) });
      expect(part.etag).toBe(`"${part.body.etag}"`);
    }
    const later = await get(id);
    expect(later.status).toBe(200);
    expect(later.body).toMatchObject({ status: 'pending', parts_received: [1, 3], parts: [{ number: 2, method: 'PUT', size: 5 * MIB }] });
  });

  it('refuses to complete while a part is missing: 409 upload_incomplete naming it', async () => {
    const c = await complete(id);
    expect([c.status, c.body.error.code]).toEqual([409, 'upload_incomplete']);
    expect(c.body.error.message).toContain('2');
  });

  it('refuses a part of the wrong size, or a number the upload does not have: 400 invalid_part', async () => {
    const short = await putPart(`${p.urls.ai}/v1/uploads/${id}/parts/2`, randomBytes(MIB));
    expect([short.status, short.body.error.code, short.body.error.param]).toEqual([400, 'invalid_part', 'n']);
    for (const n of ['4', '0', '01', 'x']) {
      const r = await putPart(`${p.urls.ai}/v1/uploads/${id}/parts/${n}`, randomBytes(10));
      expect([n, r.status, r.body.error.code]).toEqual([n, 400, 'invalid_part']);
    }
    expect((await get(id)).body.parts_received).toEqual([1, 3]);
  });

  it('completes once every part is there: the SHA-256 checked, status completed, idempotent by operation id', async () => {
    expect((await putPart(`${p.urls.ai}/v1/uploads/${id}/parts/2`, slice(file, 5 * MIB, 2))).status).toBe(200);
    const completeId = op();
    const c = await complete(id, key, completeId);
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ id, status: 'completed', parts_received: [1, 2, 3], parts: [], completed_at: expect.any(String) });
    const again = await complete(id, key, completeId);
    expect([again.status, again.headers['x-idempotent-replay'], again.body]).toEqual([200, 'true', c.body]);
    // A new id on a completed upload answers it as it is.
    expect((await complete(id)).body).toMatchObject({ status: 'completed' });
    expect((await get(id)).body).toMatchObject({ status: 'completed', parts_received: [1, 2, 3], parts: [] });
    // The bytes are the file's.
    const item = await p.engine.kv.get(uploadKey(org, id));
    const stored = await p.engine.blobs.get(uploadBytesKey(org, String(item!.workspace_id), sha(file), String(item!.gen)));
    const chunks: Buffer[] = [];
    for await (const chunk of stored!.body) chunks.push(chunk as Buffer);
    expect(sha(Buffer.concat(chunks))).toBe(sha(file));
  });

  it('refuses a part once completed: 409 upload_completed', async () => {
    const r = await putPart(`${p.urls.ai}/v1/uploads/${id}/parts/3`, slice(file, 5 * MIB, 3));
    expect([r.status, r.body.error.code]).toEqual([409, 'upload_completed']);
  });

  it('the same id with the same file answers the same upload (200); with another file, 409 operation_id_reused', async () => {
    const same = await start(fileOf(file), id);
    expect([same.status, same.body.status, same.body.id]).toEqual([200, 'completed', id]);
    for (const other of [fileOf(randomBytes(10)), fileOf(file, { filename: 'other.mp4' }), fileOf(file, { keep_source_hours: 5 })]) {
      const r = await start(other, id);
      expect([r.status, r.body.error.code]).toEqual([409, 'operation_id_reused']);
    }
  });

  it('a second upload of the same bytes keeps no second copy', async () => {
    const second = op();
    const a = await start(fileOf(file, { filename: 'copy.mp4' }), second);
    const ownGen = String((await p.engine.kv.get(uploadKey(org, second)))!.gen);
    for (const part of a.body.parts) expect((await putPart(part.url, slice(file, a.body.part_size, part.number))).status).toBe(200);
    expect((await complete(second)).body.status).toBe('completed');
    const first = await p.engine.kv.get(uploadKey(org, id));
    const copy = await p.engine.kv.get(uploadKey(org, second));
    expect(copy!.gen).toBe(first!.gen);
    expect(await p.engine.blobs.head(uploadBytesKey(org, String(copy!.workspace_id), sha(file), ownGen))).toBeUndefined();
  });
});

describe('small files and checks', () => {
  it('a tiny file is one part of its own size', async () => {
    const bytes = Buffer.from('hello uploads\n');
    const a = await start(fileOf(bytes, { content_type: 'text/plain; charset=utf-8', keep_source_hours: 168 }));
    expect(a.body).toMatchObject({ part_size: bytes.length, part_count: 1, keep_source_hours: 168, parts: [{ number: 1, size: bytes.length }] });
    expect((await putPart(a.body.parts[0].url, bytes)).status).toBe(200);
    // No body at all is taken as `{}`.
    const res = await fetch(`${p.urls.ai}/v1/uploads/${a.body.id}/complete`, { method: 'POST', headers: { ...bearer(key), 'x-operation-id': op() } });
    expect([res.status, ((await res.json()) as any).status]).toEqual([200, 'completed']);
  });

  it('bytes that do not hash to the announced SHA-256: 400 hash_mismatch, discarded, the upload pending again', async () => {
    const bytes = randomBytes(6 * MIB);
    const a = await start(fileOf(bytes, { sha256: sha(randomBytes(8)) }));
    for (const part of a.body.parts) expect((await putPart(part.url, slice(bytes, a.body.part_size, part.number))).status).toBe(200);
    const c = await complete(a.body.id);
    expect([c.status, c.body.error.code, c.body.error.param]).toEqual([400, 'hash_mismatch', 'sha256']);
    expect((await get(a.body.id)).body).toMatchObject({ status: 'pending', parts_received: [], parts: [{ number: 1 }, { number: 2 }] });
  });

  it('refuses unknown fields (400 unsupported_field) and bad values (400 invalid_body naming the field)', async () => {
    const bytes = Buffer.from('x');
    const unknown = await start({ ...fileOf(bytes), purpose: 'assistants' });
    expect([unknown.status, unknown.body.error.code, unknown.body.error.param]).toEqual([400, 'unsupported_field', 'purpose']);
    const bad: [object, string][] = [
      [{ size: 0 }, 'size'],
      [{ size: 5 * 1024 * MIB + 1 }, 'size'],
      [{ size: 1.5 }, 'size'],
      [{ sha256: 'ABC' }, 'sha256'],
      [{ sha256: sha(bytes).toUpperCase() }, 'sha256'],
      [{ filename: '' }, 'filename'],
      [{ filename: 'a\nb' }, 'filename'],
      [{ content_type: 'pdf' }, 'content_type'],
      [{ keep_source_hours: 0 }, 'keep_source_hours'],
      [{ keep_source_hours: 169 }, 'keep_source_hours'],
    ];
    for (const [change, param] of bad) {
      const r = await start({ ...fileOf(bytes), ...change });
      expect([param, r.status, r.body.error.code, r.body.error.param]).toEqual([param, 400, 'invalid_body', param]);
    }
    const missing = await start({ filename: 'a', content_type: 'text/plain', size: 1 });
    expect([missing.status, missing.body.error.code, missing.body.error.param]).toEqual([400, 'invalid_body', 'sha256']);
    const c = await complete('whatever-id', key, op(), { parts: [] });
    expect([c.status, c.body.error.code]).toEqual([400, 'unsupported_field']);
  });

  it('every write needs an X-Operation-Id, a part PUT included', async () => {
    const a = await start(fileOf(Buffer.from('needs an id')));
    const res = await fetch(a.body.parts[0].url, { method: 'PUT', body: Buffer.from('needs an id'), headers: bearer(key) });
    expect([res.status, ((await res.json()) as any).error.code]).toEqual([400, 'missing_operation_id']);
  });
});

describe('who sees an upload', () => {
  let id: string;
  const bytes = Buffer.from('a workspace file');

  beforeAll(async () => {
    id = (await start(fileOf(bytes))).body.id;
  });

  it('an unknown id: 404 upload_not_found on every route', async () => {
    expect((await get('no-such-upload')).body.error.code).toBe('upload_not_found');
    expect((await putPart(`${p.urls.ai}/v1/uploads/no-such-upload/parts/1`, bytes)).body.error.code).toBe('upload_not_found');
    const c = await complete('no-such-upload');
    expect([c.status, c.body.error.code]).toEqual([404, 'upload_not_found']);
  });

  it("another organization's key: 404 upload_not_found, and its own id space", async () => {
    const other = await tenants().createOrganization('other org');
    await tenants().createWorkspace(other.id, 'w');
    const { key: k } = await tenants().createSecretKey(other.id);
    expect((await get(id, k)).status).toBe(404);
    expect((await putPart(`${p.urls.ai}/v1/uploads/${id}/parts/1`, bytes, k)).status).toBe(404);
    expect((await complete(id, k)).status).toBe(404);
    // The same id is free there: ids are per organization.
    expect((await start(fileOf(randomBytes(5)), id, k)).status).toBe(201);
  });

  it("an application key needs knowledge (403 capability_not_enabled) and sees only its workspace's uploads", async () => {
    const without = await tenants().createApplication(p.credentials.workspace_id, 'no-knowledge', ['ai.chat']);
    const { key: noCap } = await tenants().createSecretKey(org, without.id);
    expect((await get(id, noCap)).body.error.code).toBe('capability_not_enabled');
    expect((await start(fileOf(bytes), op(), noCap)).body.error.code).toBe('capability_not_enabled');

    const same = await tenants().createApplication(p.credentials.workspace_id, 'same-workspace', ['knowledge']);
    const { key: sameKey } = await tenants().createSecretKey(org, same.id);
    expect((await get(id, sameKey)).body).toMatchObject({ id, status: 'pending' });

    const ws = await tenants().createWorkspace(org, 'elsewhere');
    const elsewhere = await tenants().createApplication(ws.id, 'elsewhere', ['knowledge']);
    const { key: otherKey } = await tenants().createSecretKey(org, elsewhere.id);
    expect((await get(id, otherKey)).status).toBe(404);
    expect((await putPart(`${p.urls.ai}/v1/uploads/${id}/parts/1`, bytes, otherKey)).status).toBe(404);
    // Ids are the organization's: another workspace cannot take this one.
    expect((await start(fileOf(bytes), id, otherKey)).body.error.code).toBe('operation_id_reused');
  });
});

describe('expiry', () => {
  it('after keep_source_hours the upload is gone (404) and the sweep removes its bytes and open parts', async () => {
    const bytes = randomBytes(1000);
    const done = (await start(fileOf(bytes, { keep_source_hours: 1 }))).body;
    await putPart(done.parts[0].url, bytes);
    expect((await complete(done.id)).body.status).toBe('completed');
    const open = (await start(fileOf(randomBytes(7 * MIB), { keep_source_hours: 1 }))).body;
    await putPart(open.parts[1].url, randomBytes(open.parts[1].size));
    const item = await p.engine.kv.get(uploadKey(org, done.id));
    const ws = String(item!.workspace_id);
    const bytesKey = uploadBytesKey(org, ws, done.sha256, String(item!.gen));
    expect(await p.engine.blobs.head(bytesKey)).toBeDefined();

    offsetMs += 3600 * 1000 + 1000;
    expect((await get(done.id)).status).toBe(404);
    expect((await get(open.id)).status).toBe(404);
    // A later start sweeps what expired.
    expect((await start(fileOf(Buffer.from('later')))).status).toBe(201);
    expect(await p.engine.blobs.head(bytesKey)).toBeUndefined();
    expect(await p.engine.kv.get(storedFileKey(org, ws, done.sha256))).toBeUndefined();
    const openItem = await p.engine.kv.get(uploadKey(org, open.id));
    expect(openItem).toBeUndefined();
    // The id of an expired upload may start a new one.
    expect((await start(fileOf(bytes), done.id)).status).toBe(201);
  });
});

describe('two calls at once', () => {
  it('a complete while another holds the upload: 409 operation_in_progress; a claim past its 15 minutes is taken over', async () => {
    const bytes = randomBytes(3000);
    const a = (await start(fileOf(bytes))).body;
    await putPart(a.parts[0].url, bytes);
    const keyOf = uploadKey(org, a.id);
    const held = Math.floor(clock.now() / 1000) + 900;
    await p.engine.kv.update({ key: keyOf, set: { status: 'completing', completing_until: held } });
    const busy = await complete(a.id);
    expect([busy.status, busy.body.error.code]).toEqual([409, 'operation_in_progress']);
    expect((await putPart(a.parts[0].url, bytes)).body.error.code).toBe('operation_in_progress');
    // The holder died: its claim lapses.
    await p.engine.kv.update({ key: keyOf, set: { completing_until: held - 901 } });
    expect((await complete(a.id)).body.status).toBe('completed');
  });

  it('a part without Content-Length (chunked): 411 length_required', async () => {
    const bytes = Buffer.from('chunked part');
    const a = (await start(fileOf(bytes))).body;
    const res = await fetch(a.parts[0].url, {
      method: 'PUT',
      body: new ReadableStream({ start: (c) => (c.enqueue(bytes), c.close()) }),
      duplex: 'half',
      headers: { ...bearer(key), 'x-operation-id': op() },
    } as RequestInit);
    expect([res.status, ((await res.json()) as any).error.code]).toEqual([411, 'length_required']);
  });
});

describe('a stored file named by two uploads', () => {
  it('keeps its bytes until the later upload expires', async () => {
    const bytes = randomBytes(2000);
    const send = async (hours: number) => {
      const a = (await start(fileOf(bytes, { keep_source_hours: hours }))).body;
      await putPart(a.parts[0].url, bytes);
      expect((await complete(a.id)).body.status).toBe('completed');
      return a.id as string;
    };
    const short = await send(1);
    const long = await send(3);
    const item = await p.engine.kv.get(uploadKey(org, long));
    const bytesKey = uploadBytesKey(org, String(item!.workspace_id), sha(bytes), String(item!.gen));
    expect((await p.engine.kv.get(uploadKey(org, short)))!.gen).toBe(item!.gen);

    offsetMs += 3600 * 1000 + 1000;
    await start(fileOf(Buffer.from('sweeps'))); // the short one's entries are due
    expect((await get(short)).status).toBe(404);
    expect((await get(long)).body.status).toBe('completed');
    expect(await p.engine.blobs.head(bytesKey)).toBeDefined();

    offsetMs += 2 * 3600 * 1000;
    await start(fileOf(Buffer.from('sweeps again')));
    expect((await get(long)).status).toBe(404);
    expect(await p.engine.blobs.head(bytesKey)).toBeUndefined();
  });
});

describe('the walk-through of docs/ai/uploads.md', () => {
  it('runs as written with curl: three parts, resumed, completed', async () => {
    // The reader's setup lines (AI_URL, KEY) are what the test sets from the platform it started.
    const script = docBlocks('docs/ai/uploads.md', ['sh'])
      .join('\n')
      .split('\n')
      .filter((line) => !/^(AI_URL|KEY)=/.test(line))
      .join('\n');
    const dir = mkdtempSync(join(tmpdir(), 'uploads-doc-'));
    try {
      const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], { cwd: dir, env: { ...process.env, AI_URL: p.urls.ai, KEY: key }, maxBuffer: 1024 * 1024 });
      const answers = stdout.split(/(?<=})(?=\{)/).map((text) => JSON.parse(text));
      expect(answers.map((a) => a.status ?? a.part_number)).toEqual(['pending', 1, 2, 'pending', 3, 'completed']);
      expect(answers[3].parts_received).toEqual([1, 2]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
