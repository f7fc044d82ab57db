/**
 * A batch's ops apply in order, and each op's unique checks see the
 * unique values as the earlier ops of the batch left them. A value an earlier op releases (update to
 * another value, unset, delete) may be claimed by a later op; a value an earlier op claims collides
 * with a later op claiming it, and a value a later op releases is still held when an earlier op
 * claims it (so a swap fails on its first op). `[update a1 email x1→x2, create d2 email=x1]` was
 * refused as 409 unique_violation, `[delete a1, create d2 email=x1]` too, and
 * `[create d2 email=x1, update a1 email x1→x2]` answered 400 invalid_body.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, expectError } from '../helpers/data-api.js';

let p: TestPlatform;
const DB = 'order';
const call = (method: string, path: string, body?: unknown) => callApi(p.urls.data, bearer(p.credentials.secret_key), method, `/v1/databases/${DB}${path}`, body);
const recs = '/collections/people/records';
const batch = (ops: unknown[]) => call('POST', '/batch', { ops });
const get = async (id: string) => (await call('GET', `${recs}/${id}`)).body;
/** Ids of the records whose (unique and indexed) email is `email`, read through the index. */
const holders = async (email: string) => ((await call('GET', `${recs}?filter[email]=${encodeURIComponent(email)}`)).body.records as any[]).map((r) => r.id);
/** Ids of the records whose indexed `n` is `n`. */
const withN = async (n: number) => ((await call('GET', `${recs}?filter[n]=${n}`)).body.records as any[]).map((r) => r.id).sort();
const upd = (id: string, data: Record<string, unknown>) => ({ op: 'update', collection: 'people', id, data });
const add = (id: string, data: Record<string, unknown>) => ({ op: 'create', collection: 'people', id, data });
const del = (id: string) => ({ op: 'delete', collection: 'people', id });

async function create(id: string, data: Record<string, unknown>) {
  const r = await call('POST', recs, { id, ...data });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

/** `email` is held: a create with it is refused. */
async function expectHeld(email: string) {
  expectError(await call('POST', recs, { email }), 409, 'unique_violation', email);
}

/** `email` is free: a create with it succeeds (the probe is deleted again). */
async function expectFree(email: string) {
  const r = await call('POST', recs, { id: 'probe', email });
  expect(r.status, `${email} ${JSON.stringify(r.body)}`).toBe(201);
  expect((await call('DELETE', `${recs}/probe`)).status).toBe(204);
}

beforeAll(async () => {
  p = await startTestPlatform();
  expect((await callApi(p.urls.data, bearer(p.credentials.secret_key), 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
  const r = await call('PUT', '/collections/people', {
    fields: [
      { name: 'email', type: 'text', unique: true, indexed: true },
      { name: 'handle', type: 'text', unique: true },
      { name: 'n', type: 'integer', indexed: true },
    ],
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
});
afterAll(async () => p?.close());

it('answers a create of an id in use with already_exists, also when it claims a value an earlier op claimed (as a single create does)', async () => {
  await create('taken1', { email: 'taken@ex' });
  await create('mover1', { email: 'mover@ex' });
  expectError(await batch([upd('mover1', { email: 'new@ex' }), add('taken1', { email: 'new@ex' })]), 409, 'already_exists');
  expect((await get('mover1')).email).toBe('mover@ex');
});

it('answers already_exists too when a later op releases the value the create of an id in use claims (its collision shows at the release)', async () => {
  await create('taken2', { email: 'taken2@ex' });
  await create('holder2', { email: 'held2@ex' });
  expectError(await batch([add('taken2', { email: 'held2@ex' }), del('holder2')]), 409, 'already_exists');
  expect((await get('holder2')).email).toBe('held2@ex');
});

describe('a value released by an earlier op may be claimed by a later op', () => {
  it("the issue's example: [update a1 email x1→x2, create d2 email=x1]", async () => {
    await create('a1', { email: 'x1@ex', n: 1 });
    const r = await batch([upd('a1', { email: 'x2@ex', n: 2 }), add('d2', { email: 'x1@ex', n: 1 })]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.results).toMatchObject([{ id: 'a1', version: 2, email: 'x2@ex' }, { id: 'd2', version: 1, email: 'x1@ex' }]);
    expect(await get('a1')).toMatchObject({ email: 'x2@ex', n: 2, version: 2 });
    expect(await get('d2')).toMatchObject({ email: 'x1@ex', n: 1, version: 1 });
    // The guards moved with the values, and the index entries point at the right records.
    await expectHeld('x1@ex');
    await expectHeld('x2@ex');
    expect(await holders('x1@ex')).toEqual(['d2']);
    expect(await holders('x2@ex')).toEqual(['a1']);
    expect(await withN(1)).toEqual(['d2']);
    expect(await withN(2)).toEqual(['a1']);
    // The new holder owns the guard: deleting it frees the value.
    expect((await call('DELETE', `${recs}/d2`)).status).toBe(204);
    await expectFree('x1@ex');
    await expectHeld('x2@ex');
  });

  it('delete then create: [delete b1 (email y1), create e2 email=y1]', async () => {
    await create('b1', { email: 'y1@ex', handle: 'yy' });
    const r = await batch([del('b1'), add('e2', { email: 'y1@ex', handle: 'yy' })]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.results).toMatchObject([{ id: 'b1', deleted: true }, { id: 'e2', email: 'y1@ex', handle: 'yy' }]);
    expectError(await call('GET', `${recs}/b1`), 404, 'record_not_found');
    expect(await holders('y1@ex')).toEqual(['e2']);
    await expectHeld('y1@ex');
    expectError(await call('POST', recs, { handle: 'yy' }), 409, 'unique_violation');
    // The guard is e2's: changing e2's email frees y1.
    expect((await call('PATCH', `${recs}/e2`, { email: 'y2@ex' })).status).toBe(200);
    await expectFree('y1@ex');
  });

  it('unset then claim by an update: [update c1 email→null, update c2 email w2→w1]', async () => {
    await create('c1', { email: 'w1@ex' });
    await create('c2', { email: 'w2@ex' });
    const r = await batch([upd('c1', { email: null }), upd('c2', { email: 'w1@ex' })]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(await get('c1')).not.toHaveProperty('email');
    expect(await holders('w1@ex')).toEqual(['c2']);
    await expectHeld('w1@ex');
    await expectFree('w2@ex');
  });

  it('a rotation in order: [update r1 v1→v0, update r2 v2→v1, update r3 v3→v2]', async () => {
    await create('r1', { email: 'v1@ex' });
    await create('r2', { email: 'v2@ex' });
    await create('r3', { email: 'v3@ex' });
    const r = await batch([upd('r1', { email: 'v0@ex' }), upd('r2', { email: 'v1@ex' }), upd('r3', { email: 'v2@ex' })]);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect([await holders('v0@ex'), await holders('v1@ex'), await holders('v2@ex'), await holders('v3@ex')]).toEqual([['r1'], ['r2'], ['r3'], []]);
    await expectFree('v3@ex');
  });
});

describe('a value claimed by an earlier op, or still held, collides', () => {
  it('two claims of one value: the later op is the culprit, and nothing applies', async () => {
    await create('g1', { email: 'z1@ex', n: 7 });
    const r = await batch([upd('g1', { email: 'z2@ex', n: 8 }), add('g2', { email: 'z1@ex' }), add('g3', { email: 'z1@ex' })]);
    expectError(r, 409, 'unique_violation');
    expect(r.body.error.param).toBe('email');
    expect(r.body.error.message).toMatch(/\boperation 2\b/i);
    expect(await get('g1')).toMatchObject({ email: 'z1@ex', n: 7, version: 1 });
    expectError(await call('GET', `${recs}/g2`), 404, 'record_not_found');
    expectError(await call('GET', `${recs}/g3`), 404, 'record_not_found');
    expect(await holders('z1@ex')).toEqual(['g1']);
    expect(await withN(7)).toEqual(['g1']);
    expect(await withN(8)).toEqual([]);
    await expectHeld('z1@ex');
    await expectFree('z2@ex');
  });

  it('two creates of one new value collide on the later op', async () => {
    const r = await batch([add('t1', { email: 'twin@ex' }), add('t2', { handle: 'h-t2' }), add('t3', { email: 'twin@ex' })]);
    expectError(r, 409, 'unique_violation');
    expect(r.body.error.message).toMatch(/\boperation 2\b/i);
    expectError(await call('GET', `${recs}/t1`), 404, 'record_not_found');
    await expectFree('twin@ex');
  });

  it('a claim before the holder releases the value is a collision on the claim: [create h2 x=q1, update h1 q1→q2]', async () => {
    await create('h1', { email: 'q1@ex' });
    const r = await batch([add('h2', { email: 'q1@ex' }), upd('h1', { email: 'q2@ex' })]);
    expectError(r, 409, 'unique_violation');
    expect(await get('h1')).toMatchObject({ email: 'q1@ex', version: 1 });
    expectError(await call('GET', `${recs}/h2`), 404, 'record_not_found');
    await expectFree('q2@ex');
  });

  it('a swap fails on its first op: [update s1 k1→k2, update s2 k2→k1]', async () => {
    await create('s1', { email: 'k1@ex', handle: 'hs1' });
    await create('s2', { email: 'k2@ex', handle: 'hs2' });
    const r = await batch([upd('s1', { email: 'k2@ex' }), upd('s2', { email: 'k1@ex' })]);
    expectError(r, 409, 'unique_violation');
    expect(r.body.error.param).toBe('email');
    expect(await get('s1')).toMatchObject({ email: 'k1@ex', version: 1 });
    expect(await get('s2')).toMatchObject({ email: 'k2@ex', version: 1 });
    expect(await holders('k1@ex')).toEqual(['s1']);
    expect(await holders('k2@ex')).toEqual(['s2']);
    // Through a third value, in order, the swap works.
    const ok = await batch([upd('s1', { email: 'k-tmp@ex' }), upd('s2', { email: 'k1@ex' })]);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const done = await batch([upd('s1', { email: 'k2@ex' })]);
    expect(done.status, JSON.stringify(done.body)).toBe(200);
    expect([await holders('k1@ex'), await holders('k2@ex'), await holders('k-tmp@ex')]).toEqual([['s2'], ['s1'], []]);
  });
});

describe('a refused batch leaves nothing applied', () => {
  it('a release and a claim followed by a failing op change nothing', async () => {
    await create('m1', { email: 'm1@ex', handle: 'hm1', n: 3 });
    await create('m2', { email: 'm2@ex' });
    await create('m5', {});
    for (const [status, code, last] of [
      [404, 'record_not_found', upd('nobody', { n: 1 })],
      [409, 'unique_violation', add('m4', { handle: 'hm1-moved', email: 'm2@ex' })],
      [409, 'already_exists', add('m5', {})],
    ] as const) {
      const r = await batch([upd('m1', { email: 'm1-new@ex', handle: 'hm1-moved', n: 4 }), add('m3', { email: 'm1@ex', handle: 'hm1', n: 3 }), del('m2'), last]);
      expectError(r, status, code);
      expect(await get('m1')).toMatchObject({ email: 'm1@ex', handle: 'hm1', n: 3, version: 1 });
      expect(await get('m2')).toMatchObject({ email: 'm2@ex', version: 1 });
      expectError(await call('GET', `${recs}/m3`), 404, 'record_not_found');
      expect(await holders('m1@ex')).toEqual(['m1']);
      expect(await holders('m1-new@ex')).toEqual([]);
      expect(await withN(3)).toEqual(['m1']);
      expect(await withN(4)).toEqual([]);
      await expectHeld('m1@ex');
      await expectHeld('m2@ex');
      await expectFree('m1-new@ex');
      expectError(await call('POST', recs, { handle: 'hm1' }), 409, 'unique_violation');
    }
    // The same batch without its failing op applies whole.
    const ok = await batch([upd('m1', { email: 'm1-new@ex', handle: 'hm1-moved', n: 4 }), add('m3', { email: 'm1@ex', handle: 'hm1', n: 3 }), del('m2'), add('m4', { email: 'm2@ex' })]);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect([await holders('m1@ex'), await holders('m1-new@ex'), await holders('m2@ex')]).toEqual([['m3'], ['m1'], ['m4']]);
    expect(await withN(3)).toEqual(['m3']);
    expect(await withN(4)).toEqual(['m1']);
  });
});
