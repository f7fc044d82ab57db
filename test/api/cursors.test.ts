/**
 * List cursors are opaque (nothing readable), tamper-proof (every altered byte is
 * refused), bound to their query and credential, for records and for the activity log. Through the
 * local server.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, expectError, ok, type Res } from '../helpers/data-api.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { sealCursor } from '../../lambdas/shared/cursors.js';

let p: TestPlatform;
let server: Record<string, string>;
let alice: Record<string, string>;
let bob: Record<string, string>;
let otherKey: Record<string, string>;
const DB = 'cursors';
/** Values that must never show in a cursor: a hidden record's indexed value and id. */
const NEEDLE = 'needlevalue';
const HIDDEN_ID = 'hiddenrecordid';

const call = (cred: Record<string, string>, method: string, path: string, body?: unknown) => callApi(p.urls.data, cred, method, path, body);
const recs = (name: string) => `/v1/databases/${DB}/collections/${name}/records`;
const ids = (r: Res) => r.body.records.map((x: any) => x.id);
const withCursor = (path: string, cursor: string) => `${path}${path.includes('?') ? '&' : '?'}cursor=${encodeURIComponent(cursor)}`;


/** Every readable rendering of a cursor: the string itself, its base64url and base64 decodings, and those decoded once more. */
function renderings(cursor: string): string {
  const once = [Buffer.from(cursor, 'base64url').toString('latin1'), Buffer.from(cursor, 'base64').toString('latin1')];
  const twice = once.flatMap((s) => s.split(/[^A-Za-z0-9_\-+/=]+/).map((part) => Buffer.from(part, 'base64url').toString('latin1')));
  return [cursor, ...once, ...twice].join('\n').toLowerCase();
}

/** Pages through `path`, returning every cursor given out. */
async function cursorsOf(cred: Record<string, string>, path: string): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 50; i++) {
    const body = await ok(call(cred, 'GET', cursor ? withCursor(path, cursor) : path));
    cursor = body.next_cursor;
    if (!cursor) return out;
    out.push(cursor);
  }
  throw new Error('the cursor never ended');
}

beforeAll(async () => {
  p = await startTestPlatform();
  server = bearer(p.credentials.secret_key);
  const t = new Tenants(p.engine.kv, () => Date.now());
  const app = await t.createApplication(p.credentials.workspace_id, 'cursors', []);
  const appServer = bearer((await t.createSecretKey(p.credentials.organization_id, app.id)).key);
  otherKey = bearer((await t.createSecretKey(p.credentials.organization_id)).key);
  const mint = async (user_id: string) => bearer((await ok(call(appServer, 'POST', '/v1/end-user-tokens', { user_id }))).token);
  alice = await mint('alice');
  bob = await mint('bob');
  await ok(call(appServer, 'PUT', `/v1/databases/${DB}`), 201);
  server = appServer;
  await ok(
    call(server, 'PUT', `/v1/databases/${DB}/collections/notes`, {
      fields: [
        { name: 'owner', type: 'text', indexed: true },
        { name: 'tag', type: 'text', indexed: true },
        { name: 'n', type: 'integer', indexed: true },
      ],
      rules: { list: 'owner = @auth.id', view: 'owner = @auth.id', create: null, update: null, delete: null },
    }),
    201,
  );
  // Alice's notes around one of Bob's, whose tag and id must not leak to Alice through her cursors.
  for (let i = 0; i < 6; i++) await ok(call(server, 'POST', recs('notes'), { id: `a${i}`, owner: 'alice', tag: `t${i}`, n: i }), 201);
  await ok(call(server, 'POST', recs('notes'), { id: HIDDEN_ID, owner: 'bob', tag: NEEDLE, n: 100 }), 201);
  for (let i = 6; i < 9; i++) await ok(call(server, 'POST', recs('notes'), { id: `z${i}`, owner: 'alice', tag: `u${i}`, n: i }), 201);
});
afterAll(async () => p?.close());

describe('records cursors', () => {
  it('reveal no value, id, organization or storage key, not even of the hidden record the page stopped on', async () => {
    const queries = ['?limit=1', '?limit=1&sort=tag', '?limit=1&sort=-tag', '?limit=2&sort=n', '?limit=1&filter[n][gte]=0', '?limit=1&filter[tag][in]=t1,t2,needlevalue'];
    let seen = 0;
    for (const query of queries) {
      for (const cred of [alice, server]) {
        for (const cursor of await cursorsOf(cred, `${recs('notes')}${query}`)) {
          seen++;
          const text = renderings(cursor);
          for (const secret of [NEEDLE, HIDDEN_ID, p.credentials.organization_id.toLowerCase(), 'org_', 'rec#', 'idx#', 'notes', DB, 'alice', '"r"', '"c"', '"pk"', '"sk"']) {
            expect(text.includes(secret), `${query}: cursor shows "${secret}"`).toBe(false);
          }
        }
      }
    }
    expect(seen).toBeGreaterThan(30);
  });

  it('refuses every cursor with one character changed, cut short or extended: 400 invalid_query, param cursor', async () => {
    const path = `${recs('notes')}?limit=2&sort=tag`;
    const [cursor] = await cursorsOf(server, path);
    const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const altered = new Set<string>();
    for (let i = 0; i < cursor.length; i++) {
      const other = ALPHABET[(ALPHABET.indexOf(cursor[i]) + 1 + (i % 63)) % 64];
      altered.add(cursor.slice(0, i) + other + cursor.slice(i + 1));
    }
    for (const cut of [1, 2, 4, 16, 17, cursor.length - 1]) altered.add(cursor.slice(0, cursor.length - cut));
    for (const extra of ['A', 'AA', 'AAAA', cursor.slice(0, 8)]) altered.add(cursor + extra);
    altered.delete(cursor);
    const accepted: string[] = [];
    for (const bad of altered) {
      const r = await call(server, 'GET', withCursor(path, bad));
      if (r.status !== 400 || r.body?.error?.code !== 'invalid_query' || r.body.error.param !== 'cursor') accepted.push(`${bad} -> ${r.status}`);
    }
    expect(accepted).toEqual([]);
    expect(ids(await call(server, 'GET', withCursor(path, cursor)))).toEqual(['a1', 'a2']);
  });

  it('refuses a cursor sealed with any other key (a forgery), whatever it holds', async () => {
    const forged = { get: async () => randomBytes(32) };
    for (const state of [{ r: 0 }, { r: 0, c: 'x' }]) {
      expectError(await call(server, 'GET', withCursor(`${recs('notes')}?limit=1`, await sealCursor(forged, state, 'anything'))), 400, 'invalid_query');
    }
  });

  it('binds a cursor to its collection, sort, filters, terms and credential; limit may change', async () => {
    await ok(call(server, 'PUT', `/v1/databases/${DB}/collections/twin`, { fields: [{ name: 'owner', type: 'text', indexed: true }, { name: 'tag', type: 'text', indexed: true }, { name: 'n', type: 'integer', indexed: true }] }), 201);
    const base = `${recs('notes')}?limit=2&sort=tag`;
    const [cursor] = await cursorsOf(server, base);
    const elsewhere = [
      [server, `${recs('twin')}?limit=2&sort=tag`],
      [server, `${recs('notes')}?limit=2&sort=-tag`],
      [server, `${recs('notes')}?limit=2&sort=n`],
      [server, `${recs('notes')}?limit=2&sort=tag&filter[tag][gte]=a`],
      [server, `${recs('notes')}?limit=2`],
      [otherKey, base],
      [alice, base],
    ] as const;
    for (const [cred, path] of elsewhere) {
      const r = await call(cred, 'GET', withCursor(path, cursor));
      // otherKey is not bound to the application that made the database: it does not see the database at all.
      if (cred === otherKey && r.status === 404) continue;
      expectError(r, 400, 'invalid_query', `${path}`);
      expect(r.body.error.param).toBe('cursor');
    }
    // Alice's cursor is hers: Bob cannot continue it.
    const [aliceCursor] = await cursorsOf(alice, `${recs('notes')}?limit=1`);
    expectError(await call(bob, 'GET', withCursor(`${recs('notes')}?limit=1`, aliceCursor)), 400, 'invalid_query');
    // The same query with another limit continues where the first page stopped.
    expect(ids(await call(server, 'GET', withCursor(`${recs('notes')}?limit=3&sort=tag`, cursor)))).toEqual(['a1', 'a2', 'a3']);
  });

  it('keeps working across a restart of the server (the key file persists)', async () => {
    const path = `${recs('notes')}?limit=4&sort=n`;
    const [cursor] = await cursorsOf(server, path);
    const { FileSecret } = await import('../../lambdas/engine/embedded/secret.js');
    const again = new FileSecret(`${p.dataDir}/server-secret.key`);
    expect(Buffer.from(await again.get())).toEqual(Buffer.from(await p.engine.secret.get()));
    expect(ids(await call(server, 'GET', withCursor(path, cursor)))).toEqual(['a4', 'a5', 'z6', 'z7']);
  });
});

describe('activity cursors', () => {
  it('reveal nothing readable, refuse altered bytes and another caller', async () => {
    const owner = bearer(p.credentials.secret_key);
    const path = '/v1/activity?limit=1';
    const body = await ok(call(owner, 'GET', path));
    const cursor: string = body.next_cursor;
    expect(cursor).toEqual(expect.any(String));
    const text = renderings(cursor);
    for (const secret of [p.credentials.organization_id.toLowerCase(), 'act#', '"q"', '"after"', 'kinds', String(new Date().getUTCFullYear())]) {
      expect(text.includes(secret), `activity cursor shows "${secret}"`).toBe(false);
    }
    const wrong: string[] = [];
    for (let i = 0; i < cursor.length; i += 3) {
      const bad = cursor.slice(0, i) + (cursor[i] === 'A' ? 'B' : 'A') + cursor.slice(i + 1);
      const r = await call(owner, 'GET', withCursor(path, bad));
      if (r.status !== 400 || r.body?.error?.code !== 'invalid_query') wrong.push(`${i} -> ${r.status}`);
    }
    expect(wrong).toEqual([]);
    // Another caller of the same organization (bound to an application) cannot continue it.
    expectError(await call(server, 'GET', withCursor(path, cursor)), 400, 'invalid_query');
    await ok(call(owner, 'GET', withCursor(path, cursor)));
  });
});
