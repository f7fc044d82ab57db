/**
 * The Data API's after-commit hooks (data/hooks.ts), driven through the local server: each committed
 * record and file write fires its event once, after the commit (the hook already reads the new state),
 * a refused write fires nothing, and a failing hook never fails the write.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, expectError } from '../helpers/data-api.js';
import { dataHooks, type DataHookEvent } from '../../lambdas/data/hooks.js';
import { recordKey } from '../../lambdas/data/keys.js';

let p: TestPlatform;
const events: (DataHookEvent & { committed: boolean; by: string })[] = [];
const unbind: (() => void)[] = [];
const DB = 'hooked';
const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  callApi(p.urls.data, bearer(p.credentials.secret_key), method, `/v1/databases/${DB}${path}`, body, headers);

beforeAll(async () => {
  p = await startTestPlatform();
  unbind.push(
    dataHooks.on('*', async (event, scope) => {
      // Fired after the commit: the record is already there (or gone), as every later reader sees it.
      let committed = true;
      if ('recordId' in event) {
        const item = await scope.engine.kv.get(recordKey(scope.principal.organizationId, DB, event.collection, event.recordId));
        committed = event.type === 'record.deleted' ? item === undefined : item !== undefined;
      }
      events.push({ ...event, committed, by: scope.principal.kind });
    }),
    dataHooks.on('record.created', () => {
      throw new Error('a failing hook');
    }),
  );
  expect((await callApi(p.urls.data, bearer(p.credentials.secret_key), 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
  expect((await call('PUT', '/collections/notes', { fields: [{ name: 'title', type: 'text', unique: true }] })).status).toBeLessThan(300);
});
afterAll(async () => {
  unbind.forEach((off) => off());
  await p?.close();
});

describe('data hooks', () => {
  it('fire record.created, record.updated and record.deleted once each, after the commit, despite a failing hook', async () => {
    events.length = 0;
    const created = await call('POST', '/collections/notes/records', { id: 'n1', title: 'a' });
    expect(created.status).toBe(201);
    expect((await call('PATCH', '/collections/notes/records/n1', { title: 'b' })).status).toBe(200);
    expect((await call('DELETE', '/collections/notes/records/n1')).status).toBe(204);
    expect(events.filter((e) => 'recordId' in e)).toEqual([
      { type: 'record.created', database: DB, collection: 'notes', recordId: 'n1', version: 1, committed: true, by: 'secret_key' },
      { type: 'record.updated', database: DB, collection: 'notes', recordId: 'n1', version: 2, committed: true, by: 'secret_key' },
      { type: 'record.deleted', database: DB, collection: 'notes', recordId: 'n1', version: null, committed: true, by: 'secret_key' },
    ]);
  });

  it('fire nothing for a refused write, and one event per op of a batch', async () => {
    expect((await call('POST', '/collections/notes/records', { id: 'u1', title: 'same' })).status).toBe(201);
    events.length = 0;
    expectError(await call('POST', '/collections/notes/records', { id: 'u2', title: 'same' }), 409, 'unique_violation');
    expectError(await call('PATCH', '/collections/notes/records/u1', { title: 'x' }, { 'if-match': '"9"' }), 409, 'version_conflict');
    expect(events).toEqual([]);
    const batch = await call('POST', '/batch', {
      ops: [
        { op: 'create', collection: 'notes', id: 'b1', data: { title: 'b1' } },
        { op: 'create', collection: 'notes', id: 'b2', data: { title: 'b2' } },
      ],
    });
    expect(batch.status).toBe(200);
    expect(events.map((e) => [e.type, 'recordId' in e ? e.recordId : null, e.committed])).toEqual([
      ['record.created', 'b1', true],
      ['record.created', 'b2', true],
    ]);
  });

  it('fire file.created once for a stored file (not for a second PUT of it), file.read and file.deleted', async () => {
    events.length = 0;
    const bytes = Buffer.from('hooked file');
    const sha = createHash('sha256').update(bytes).digest('hex');
    const put = () => fetch(`${p.urls.data}/v1/databases/${DB}/blobs/${sha}`, { method: 'PUT', headers: { ...bearer(p.credentials.secret_key), 'content-type': 'text/plain' }, body: bytes });
    expect((await put()).status).toBe(201);
    expect((await put()).status).toBe(200);
    expect((await (await fetch(`${p.urls.data}/v1/databases/${DB}/blobs/${sha}`, { headers: bearer(p.credentials.secret_key) })).arrayBuffer()).byteLength).toBe(bytes.length);
    expect((await fetch(`${p.urls.data}/v1/databases/${DB}/blobs/${sha}`, { method: 'DELETE', headers: bearer(p.credentials.secret_key) })).status).toBe(204);
    expect(events).toEqual([
      { type: 'file.created', database: DB, sha256: sha, size: bytes.length, contentType: 'text/plain', committed: true, by: 'secret_key' },
      { type: 'file.read', database: DB, sha256: sha, size: bytes.length, contentType: 'application/octet-stream', committed: true, by: 'secret_key' },
      { type: 'file.deleted', database: DB, sha256: sha, size: bytes.length, contentType: null, committed: true, by: 'secret_key' },
    ]);
  });
});
