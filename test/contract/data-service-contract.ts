/**
 * The Data service over one engine, end to end: the local platform is started over the given engine
 * (in this process, or by `serve`: as `npm start` in a child) and driven over HTTP, so requests go through the real handlers, middleware and services. Each
 * engine runs it (data.*.test.ts); what passes here behaves the same on SQLite + files and on
 * DynamoDB + S3.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../lambdas/engine/ports.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { startPlatform } from '../../lambdas/local/platform.js';
import { recordKey } from '../../lambdas/data/keys.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';

/** Builds a fresh engine; the server's close closes it (engine.close must release everything it holds). */
export type MakeEngine = () => Promise<Engine>;

/** Serves the Data API over the data `engine` holds; `close` stops that and closes `engine`. */
export type Serve = (engine: Engine) => Promise<{ url: string; close(): Promise<void> }>;

/** The local platform in this process, over `engine` itself. */
const inThisProcess: Serve = async (engine) => {
  const platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 } });
  registerApiOrigins(platform.urls);
  return { url: platform.urls.data, close: () => platform.close() };
};

interface Answer {
  status: number;
  etag: string | null;
  body: any;
}

export function dataServiceContract(name: string, makeEngine: MakeEngine, serve: Serve = inThisProcess) {
  describe(`Data service: ${name}`, () => {
    let engine: Engine;
    let server: Awaited<ReturnType<Serve>> | undefined;
    let org: string;
    let key: string;
    const DB = 'library';

    beforeAll(async () => {
      engine = await makeEngine();
      const tenants = new Tenants(engine.kv, () => engine.clock.now());
      org = (await tenants.createOrganization('Contract')).id;
      await tenants.createWorkspace(org, 'default');
      key = (await tenants.createSecretKey(org)).key;
      server = await serve(engine);
    });
    afterAll(async () => {
      if (server) await server.close();
      else await engine?.close();
    });

    async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
      const res = await fetch(`${server!.url}/v1/databases/${DB}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, etag: res.headers.get('etag'), body: text ? JSON.parse(text) : undefined };
    }
    const records = (collection: string) => `/collections/${collection}/records`;
    const errorCode = (a: Answer) => a.body?.error?.code;

    /** Every record a list query yields, following next_cursor; also the page sizes. */
    async function listAll(collection: string, query: string): Promise<{ records: any[]; pages: number[] }> {
      const out: any[] = [];
      const pages: number[] = [];
      let cursor: string | null = null;
      do {
        const qs = query + (cursor ? `&cursor=${encodeURIComponent(cursor)}` : '');
        const a = await call('GET', `${records(collection)}?${qs}`);
        expect(a.status, JSON.stringify(a.body)).toBe(200);
        out.push(...a.body.records);
        pages.push(a.body.records.length);
        cursor = a.body.next_cursor;
      } while (cursor);
      return { records: out, pages };
    }

    it('creates the database and collections with unique, indexed, fulltext and relation fields', async () => {
      expect((await call('PUT', '')).status).toBe(201);
      expect((await call('PUT', '')).status).toBe(200);
      const authors = await call('PUT', '/collections/authors', { fields: [{ name: 'name', type: 'text', required: true, unique: true }] });
      expect(authors.status).toBe(201);
      const books = {
        fields: [
          { name: 'title', type: 'text', required: true, fulltext: true },
          { name: 'isbn', type: 'text', unique: true },
          { name: 'pages', type: 'integer', indexed: true },
          { name: 'author', type: 'relation', target: 'authors', indexed: true },
          { name: 'meta', type: 'json' },
        ],
      };
      const created = await call('PUT', '/collections/books', books);
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({ name: 'books', mode: 'schema', schema_version: 1 });
      expect(created.body.fields).toEqual(books.fields);
      const again = await call('PUT', '/collections/books', books);
      expect(again.status).toBe(200);
      expect(again.body.schema_version).toBe(1);
      const got = await call('GET', '/collections/books');
      expect(got.status).toBe(200);
      expect(got.body.fields).toEqual(books.fields);
      expect((await call('PUT', '/collections/docs', { fields: [{ name: 'text', type: 'text' }, { name: 'n', type: 'integer', indexed: true }] })).status).toBe(201);
    });

    it('stores every value the API accepts, alike on both engines: any finite number, deep nesting, prototype-named keys', async () => {
      expect((await call('PUT', '/collections/values', { mode: 'free', fields: [{ name: 'n', type: 'number', indexed: true }, { name: 'doc', type: 'json' }] })).status).toBe(201);
      let deep: unknown = 'bottom';
      for (let i = 0; i < 60; i++) deep = i % 2 ? [deep] : { k: deep };
      const cases: Record<string, unknown>[] = [
        { n: 2 ** 53 + 2, doc: { big: 1.7976931348623157e308, tiny: 5e-324, neg: -1e200, exp: 1e21 } },
        { n: -1.5e300, doc: [Number.MAX_SAFE_INTEGER + 2, 123456789012345680000] },
        { n: 5e-324, doc: deep },
        { n: 1, doc: JSON.parse('{"__proto__": {"constructor": 1}, "toString": [2], "valueOf": {"__proto__": 3}}'), free: JSON.parse('{"__proto__": 4}') },
        { n: 2, doc: { '': 1, constructor: { name: 'Set' }, nested: { constructor: { name: 'String', length: 3 } } }, constructor: 'free field', valueOf: 5 },
      ];
      for (const [i, values] of cases.entries()) {
        const raw = JSON.stringify({ id: `v${i}`, ...values });
        const created = await fetch(`${server!.url}/v1/databases/${DB}${records('values')}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: raw,
        });
        const text = await created.text();
        expect(created.status, `v${i}: ${text.slice(0, 300)}`).toBe(201);
        const got = await call('GET', `${records('values')}/v${i}`);
        expect(got.status).toBe(200);
        const { id: _id, version: _v, created_at: _c, updated_at: _u, ...stored } = got.body;
        expect(JSON.stringify(stored), `v${i}`).toBe(JSON.stringify(JSON.parse(raw, (k, v) => (k === 'id' ? undefined : v))));
      }
      const sorted = await listAll('values', 'sort=n&limit=2');
      expect(sorted.records.map((r) => r.id)).toEqual(['v1', 'v2', 'v3', 'v4', 'v0']);
    });

    it('drops and re-adds fields named like Object.prototype members in a free collection', async () => {
      const fields = (names: string[]) => ({ mode: 'free', fields: names.map((name) => ({ name, type: 'integer' })) });
      expect((await call('PUT', '/collections/protos', fields(['constructor', 'toString', 'keep']))).status).toBe(201);
      expect((await call('POST', records('protos'), { id: 'p1', constructor: 1, toString: 2, keep: 3, valueOf: 4 })).status).toBe(201);
      const dropped = await call('PUT', '/collections/protos', fields(['keep']));
      expect(dropped.status, JSON.stringify(dropped.body)).toBe(200);
      const got = await call('GET', `${records('protos')}/p1`);
      expect(got.body).toMatchObject({ keep: 3, valueOf: 4 });
      expect(Object.hasOwn(got.body, 'constructor') || Object.hasOwn(got.body, 'toString')).toBe(false);
      expect((await call('PUT', '/collections/protos', fields(['keep', 'constructor']))).status).toBe(200);
      expect((await call('PATCH', `${records('protos')}/p1`, { constructor: 9 })).body).toMatchObject({ constructor: 9, keep: 3, valueOf: 4 });
    });

    it('orders and guards text keys holding NUL, U+0001 and the empty string', async () => {
      expect((await call('PUT', '/collections/keys', { fields: [{ name: 'u', type: 'text', unique: true, indexed: true }] })).status).toBe(201);
      const values: Record<string, string> = { k0: '', k1: 'a', k2: 'a\u0000', k3: 'a\u0000b', k4: 'a\u0001', k5: 'ab' };
      for (const [id, u] of Object.entries(values)) expect((await call('POST', records('keys'), { id, u })).status, id).toBe(201);
      const ids = async (q: string) => (await listAll('keys', `${q}&limit=2`)).records.map((r) => r.id);
      expect(await ids('sort=u')).toEqual(['k0', 'k1', 'k2', 'k3', 'k4', 'k5']);
      expect(await ids('sort=-u')).toEqual(['k5', 'k4', 'k3', 'k2', 'k1', 'k0']);
      expect(await ids('filter[u][gt]=a')).toEqual(['k2', 'k3', 'k4', 'k5']);
      expect(await ids('filter[u][lte]=a')).toEqual(['k0', 'k1']);
      expect(await ids(`filter[u]=${encodeURIComponent('a\u0000')}`)).toEqual(['k2']);
      expect(errorCode(await call('POST', records('keys'), { id: 'dup', u: '' }))).toBe('unique_violation');
      expect(errorCode(await call('PATCH', `${records('keys')}/k1`, { u: 'a\u0000' }))).toBe('unique_violation');
      expect((await call('DELETE', `${records('keys')}/k0`)).status).toBe(204);
      expect((await call('PATCH', `${records('keys')}/k1`, { u: '' })).status).toBe(200);
      expect(errorCode(await call('POST', records('keys'), { id: 'dup', u: '' }))).toBe('unique_violation');
    });

    it('creates, reads, updates with If-Match and deletes a record', async () => {
      const author = await call('POST', records('authors'), { id: 'le-guin', name: 'Ursula K. Le Guin' });
      expect(author.status).toBe(201);
      const created = await call('POST', records('books'), {
        id: 'earthsea',
        title: 'A Wizard of Earthsea',
        isbn: '978-0-553-38304-8',
        pages: 183,
        author: 'le-guin',
        meta: { tags: ['magic', 'islands'], first: { year: 1968 } },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect(created.etag).toBe('"1"');
      expect(created.body).toMatchObject({ id: 'earthsea', version: 1, pages: 183, meta: { first: { year: 1968 } } });

      const got = await call('GET', `${records('books')}/earthsea`);
      expect(got.status).toBe(200);
      expect(got.body).toEqual(created.body);
      expect((await call('GET', `${records('books')}/earthsea`, undefined, { 'if-none-match': '"1"' })).status).toBe(304);
      expect(errorCode(await call('POST', records('books'), { id: 'earthsea', title: 'again' }))).toBe('already_exists');

      const patched = await call('PATCH', `${records('books')}/earthsea`, { pages: 205, meta: null }, { 'if-match': '"1"' });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      expect(patched.etag).toBe('"2"');
      expect(patched.body).toMatchObject({ version: 2, pages: 205, title: 'A Wizard of Earthsea', created_at: created.body.created_at });
      expect(patched.body).not.toHaveProperty('meta');

      const stale = await call('PATCH', `${records('books')}/earthsea`, { pages: 1 }, { 'if-match': '1' });
      expect(stale.status).toBe(409);
      expect(errorCode(stale)).toBe('version_conflict');
      const staleDelete = await call('DELETE', `${records('books')}/earthsea`, undefined, { 'if-match': 'W/"1"' });
      expect(errorCode(staleDelete)).toBe('version_conflict');
      expect((await call('GET', `${records('books')}/earthsea`)).body.pages).toBe(205);

      expect((await call('DELETE', `${records('books')}/earthsea`, undefined, { 'if-match': '"2"' })).status).toBe(204);
      const gone = await call('GET', `${records('books')}/earthsea`);
      expect(gone.status).toBe(404);
      expect(errorCode(gone)).toBe('record_not_found');
      expect(errorCode(await call('PATCH', `${records('books')}/earthsea`, { pages: 1 }))).toBe('record_not_found');
      // Its unique guard went with it: the ISBN is free again, and the index has no entry left behind.
      expect((await call('POST', records('books'), { id: 'earthsea-2', title: 'Reissue', isbn: '978-0-553-38304-8', pages: 205 })).status).toBe(201);
      const byPages = await call('GET', `${records('books')}?filter[pages]=205`);
      expect(byPages.body.records.map((r: any) => r.id)).toEqual(['earthsea-2']);
      expect((await call('DELETE', `${records('books')}/earthsea-2`)).status).toBe(204);
    });

    it('enforces unique values and relations, and frees a unique value when it changes', async () => {
      expect((await call('POST', records('books'), { id: 'u1', title: 'One', isbn: 'isbn-a' })).status).toBe(201);
      const dup = await call('POST', records('books'), { id: 'u2', title: 'Two', isbn: 'isbn-a' });
      expect(dup.status).toBe(409);
      expect(dup.body.error).toMatchObject({ code: 'unique_violation', param: 'isbn' });
      expect((await call('GET', `${records('books')}/u2`)).status).toBe(404);
      const dupUpdate = await call('POST', records('books'), { id: 'u2', title: 'Two', isbn: 'isbn-b' });
      expect(dupUpdate.status).toBe(201);
      expect(errorCode(await call('PATCH', `${records('books')}/u2`, { isbn: 'isbn-a' }))).toBe('unique_violation');

      expect((await call('PATCH', `${records('books')}/u1`, { isbn: 'isbn-c' })).status).toBe(200);
      expect((await call('PATCH', `${records('books')}/u2`, { isbn: 'isbn-a' })).status).toBe(200);
      expect(errorCode(await call('POST', records('books'), { id: 'u3', title: 'Three', isbn: 'isbn-c' }))).toBe('unique_violation');

      const orphan = await call('POST', records('books'), { id: 'u4', title: 'Nobody wrote it', author: 'nobody' });
      expect(orphan.status).toBe(400);
      expect(orphan.body.error).toMatchObject({ code: 'invalid_value', param: 'author' });
      expect((await call('GET', `${records('books')}/u4`)).status).toBe(404);
      for (const id of ['u1', 'u2']) expect((await call('DELETE', `${records('books')}/${id}`)).status).toBe(204);
    });

    it('lists with filters, sorts, full text and cursor paging', async () => {
      const ops = Array.from({ length: 25 }, (_, i) => ({
        op: 'create',
        collection: 'books',
        id: `list-${String(i).padStart(2, '0')}`,
        data: { title: i % 5 === 0 ? `Dragon tale ${i}` : `Volume ${i}`, pages: (i * 7) % 25, isbn: `list-isbn-${i}`, ...(i % 2 ? { author: 'le-guin' } : {}) },
      }));
      const batch = await call('POST', '/batch', { ops });
      expect(batch.status, JSON.stringify(batch.body)).toBe(200);
      expect(batch.body.results).toHaveLength(25);

      const all = await listAll('books', 'limit=7');
      expect(all.records.map((r) => r.id)).toEqual(ops.map((o) => o.id));
      expect(all.pages).toEqual([7, 7, 7, 4]);

      const range = await listAll('books', 'filter[pages][gte]=10&filter[pages][lt]=20&limit=3');
      expect(range.records.map((r) => r.pages)).toEqual([10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);

      const descending = await listAll('books', 'sort=-pages&limit=4');
      expect(descending.records.map((r) => r.pages)).toEqual(Array.from({ length: 25 }, (_, i) => 24 - i));

      const set = await listAll('books', 'filter[pages][in]=3,1,2&limit=2');
      expect(set.records.map((r) => r.pages)).toEqual([1, 2, 3]);

      const byAuthor = await listAll('books', 'filter[author]=le-guin&limit=5');
      expect(byAuthor.records.map((r) => r.id).sort()).toEqual(ops.filter((_, i) => i % 2).map((o) => o.id));

      const text = await listAll('books', 'q=drag&limit=2');
      expect(text.records.map((r) => r.id)).toEqual(['list-00', 'list-05', 'list-10', 'list-15', 'list-20']);

      const bad = await call('GET', `${records('books')}?filter[title]=x`);
      expect(bad.status).toBe(400);
      expect(errorCode(bad)).toBe('invalid_query');
      expect(errorCode(await call('GET', `${records('books')}?cursor=not-a-cursor`))).toBe('invalid_query');
    });

    it('applies a batch all or nothing: a failing last op leaves nothing behind', async () => {
      const creates = ['b1', 'b2', 'b3'].map((id, i) => ({ op: 'create', collection: 'books', id: `batch-${id}`, data: { title: id, isbn: `batch-isbn-${i}`, pages: 900 + i } }));
      const author = { op: 'update', collection: 'authors', id: 'le-guin', data: { name: 'U. K. Le Guin' } };

      const missing = await call('POST', '/batch', { ops: [...creates, author, { op: 'update', collection: 'books', id: 'no-such-book', data: { pages: 1 } }] });
      expect(missing.status).toBe(404);
      expect(errorCode(missing)).toBe('record_not_found');

      // Fails only inside the transaction: the guard of an existing record's ISBN.
      const dup = await call('POST', '/batch', { ops: [...creates, author, { op: 'create', collection: 'books', id: 'batch-dup', data: { title: 'dup', isbn: 'list-isbn-3' } }] });
      expect(dup.status).toBe(409);
      expect(dup.body.error).toMatchObject({ code: 'unique_violation', param: 'isbn' });

      const stale = await call('POST', '/batch', { ops: [...creates, author, { op: 'delete', collection: 'books', id: 'list-00', version: 7 }] });
      expect(errorCode(stale)).toBe('version_conflict');

      for (const c of creates) expect((await call('GET', `${records('books')}/${c.id}`)).status).toBe(404);
      expect((await call('GET', `${records('authors')}/le-guin`)).body).toMatchObject({ version: 1, name: 'Ursula K. Le Guin' });
      expect((await listAll('books', 'filter[pages][gte]=900')).records).toEqual([]);
      // No guard was left behind: the same batch now succeeds whole.
      const ok = await call('POST', '/batch', { ops: [...creates, author, { op: 'delete', collection: 'books', id: 'list-00', version: 1 }] });
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      expect(ok.body.results.map((r: any) => r.id)).toEqual(['batch-b1', 'batch-b2', 'batch-b3', 'le-guin', 'list-00']);
      expect(ok.body.results[4]).toEqual({ id: 'list-00', deleted: true });
      expect((await listAll('books', 'filter[pages][gte]=900')).records.map((r) => r.id)).toEqual(['batch-b1', 'batch-b2', 'batch-b3']);
      expect((await call('GET', `${records('authors')}/le-guin`)).body).toMatchObject({ version: 2, name: 'U. K. Le Guin' });
    });

    it('applies a batch in order: a unique value released by an earlier op is taken by a later one (one write per guard item)', async () => {
      expect((await call('PUT', '/collections/handles', { fields: [{ name: 'h', type: 'text', unique: true, indexed: true }] })).status).toBe(201);
      for (const [id, h] of [['o1', 'h1'], ['o2', 'h2']]) expect((await call('POST', records('handles'), { id, h })).status).toBe(201);
      const holders = async (h: string) => (await listAll('handles', `filter[h]=${h}`)).records.map((r) => r.id);
      const upd = (id: string, h: string) => ({ op: 'update', collection: 'handles', id, data: { h } });
      const add = (id: string, h: string) => ({ op: 'create', collection: 'handles', id, data: { h } });

      // Update then create, delete then create: each guard item is taken over in one conditional write.
      const ok = await call('POST', '/batch', { ops: [upd('o1', 'h9'), add('o3', 'h1'), { op: 'delete', collection: 'handles', id: 'o2' }, add('o4', 'h2')] });
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      expect([await holders('h1'), await holders('h2'), await holders('h9')]).toEqual([['o3'], ['o4'], ['o1']]);
      for (const h of ['h1', 'h2', 'h9']) expect(errorCode(await call('POST', records('handles'), { h }))).toBe('unique_violation');

      // A swap fails on its first op; two claims of one value fail on the later; nothing applies.
      const swap = await call('POST', '/batch', { ops: [upd('o3', 'h2'), upd('o4', 'h1')] });
      expect(swap.body.error).toMatchObject({ code: 'unique_violation', param: 'h' });
      const twice = await call('POST', '/batch', { ops: [upd('o1', 'h8'), add('o5', 'h9'), add('o6', 'h9')] });
      expect(twice.body.error).toMatchObject({ code: 'unique_violation', param: 'h' });
      expect(twice.body.error.message).toMatch(/operation 2/i);
      expect([await holders('h1'), await holders('h2'), await holders('h8'), await holders('h9')]).toEqual([['o3'], ['o4'], [], ['o1']]);
      expect((await call('GET', `${records('handles')}/o5`)).status).toBe(404);
      expect((await call('GET', `${records('handles')}/o1`)).body).toMatchObject({ h: 'h9', version: 2 });
    });

    it('round-trips a ~500 KiB record whose body lives in the blob store', async () => {
      const text = Array.from({ length: 500 * 1024 }, (_, i) => String.fromCharCode(97 + ((i * 31) % 26))).join('');
      const created = await call('POST', records('docs'), { id: 'big', text, n: 1 });
      expect(created.status, JSON.stringify(created.body).slice(0, 300)).toBe(201);
      const item = await engine.kv.get(recordKey(org, DB, 'docs', 'big'));
      expect(item).toBeDefined();
      expect(typeof item!.body).toBe('string');
      expect(item).not.toHaveProperty('values');
      const firstBody = item!.body as string;
      expect(await engine.blobs.head(firstBody)).toBeDefined();

      const got = await call('GET', `${records('docs')}/big`);
      expect(got.status).toBe(200);
      expect(got.body.text).toBe(text);
      expect(got.body.n).toBe(1);

      // A failed write deletes the body it stored before its transaction, and only that one: a create
      // that clashes with the existing id must not touch the existing record's body.
      const clash = await call('POST', records('docs'), { id: 'big', text: 'x'.repeat(400 * 1024) });
      expect(errorCode(clash)).toBe('already_exists');
      const afterClash = await call('GET', `${records('docs')}/big`);
      expect(afterClash.status).toBe(200);
      expect(afterClash.body.text).toBe(text);
      expect(await engine.blobs.head(firstBody)).toBeDefined();

      const changed = text.toUpperCase();
      const patched = await call('PATCH', `${records('docs')}/big`, { text: changed }, { 'if-match': '"1"' });
      expect(patched.status).toBe(200);
      expect((await call('GET', `${records('docs')}/big`)).body).toMatchObject({ version: 2, text: changed, n: 1 });
      const secondBody = (await engine.kv.get(recordKey(org, DB, 'docs', 'big')))!.body as string;
      expect(secondBody).not.toBe(firstBody);
      expect(await engine.blobs.head(firstBody)).toBeUndefined(); // the replaced body is deleted after the commit

      const listed = await call('GET', `${records('docs')}?filter[n]=1`);
      expect(listed.body.records.map((r: any) => r.text.length)).toEqual([text.length]);

      expect((await call('DELETE', `${records('docs')}/big`)).status).toBe(204);
      expect(await engine.blobs.head(secondBody)).toBeUndefined();
      expect(await engine.kv.get(recordKey(org, DB, 'docs', 'big'))).toBeUndefined();
    });

    it('lets a file be read by an end user only through a record its view rule shows (the blob lookup entries)', async () => {
      const tenants = new Tenants(engine.kv, () => engine.clock.now());
      const app = await tenants.createApplication((await tenants.createWorkspace(org, 'files')).id, 'files', []);
      const appKey = (await tenants.createSecretKey(org, app.id)).key;
      const as = async (k: string, method: string, path: string, body?: unknown) => {
        const res = await fetch(`${server!.url}/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${k}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : body instanceof Buffer ? body : JSON.stringify(body),
        });
        return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
      };
      const token = async (user_id: string) => JSON.parse((await as(appKey, 'POST', '/end-user-tokens', { user_id })).bytes.toString()).token as string;
      const [alice, bob] = [await token('alice'), await token('bob')];
      expect((await as(appKey, 'PUT', '/databases/shelf')).status).toBe(201);
      const rules = { view: 'owner = @auth.id', update: 'owner = @auth.id', create: '@request.owner = @auth.id' };
      expect((await as(appKey, 'PUT', '/databases/shelf/collections/scans', { fields: [{ name: 'owner', type: 'text' }, { name: 'file', type: 'blob' }], rules })).status).toBe(201);
      const bytes = Buffer.from('a scanned page');
      const sha = createHash('sha256').update(bytes).digest('hex');
      expect((await as(alice, 'PUT', `/databases/shelf/blobs/${sha}`, bytes)).status).toBe(201);
      expect((await as(alice, 'GET', `/databases/shelf/blobs/${sha}`)).status).toBe(404); // no record holds it yet
      expect((await as(alice, 'POST', '/databases/shelf/collections/scans/records', { id: 's1', owner: 'alice', file: sha })).status).toBe(201);
      const got = await as(alice, 'GET', `/databases/shelf/blobs/${sha}`);
      expect([got.status, got.bytes.equals(bytes)]).toEqual([200, true]);
      expect((await as(bob, 'GET', `/databases/shelf/blobs/${sha}`)).status).toBe(404);
      expect((await as(bob, 'DELETE', `/databases/shelf/blobs/${sha}`)).status).toBe(404);
      expect((await as(alice, 'PATCH', '/databases/shelf/collections/scans/records/s1', { file: null })).status).toBe(200);
      expect((await as(alice, 'GET', `/databases/shelf/blobs/${sha}`)).status).toBe(404);
      expect((await as(alice, 'PATCH', '/databases/shelf/collections/scans/records/s1', { file: sha })).status).toBe(200);
      expect((await as(alice, 'DELETE', `/databases/shelf/blobs/${sha}`)).status).toBe(204);
      expect((await as(appKey, 'GET', `/databases/shelf/blobs/${sha}`)).status).toBe(404);
    });
  });
}
