/** Databases (spec 4.12, 4.13) through the local server, with application ownership. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { Tenants } from '../../lambdas/auth/tenants.js';

let p: TestPlatform;
let appKey: string;
let otherAppKey: string;

beforeAll(async () => {
  p = await startTestPlatform();
  const t = new Tenants(p.engine.kv, () => Date.now());
  const org = p.credentials.organization_id;
  const a = await t.createApplication(p.credentials.workspace_id, 'a', []);
  const b = await t.createApplication(p.credentials.workspace_id, 'b', []);
  appKey = (await t.createSecretKey(org, a.id)).key;
  otherAppKey = (await t.createSecretKey(org, b.id)).key;
});
afterAll(async () => p?.close());

const put = (key: string, name: string) => fetch(`${p.urls.data}/v1/databases/${name}`, { method: 'PUT', headers: bearer(key) });
const list = async (key: string) => ((await (await fetch(`${p.urls.data}/v1/databases`, { headers: bearer(key) })).json()) as any).databases;

describe('databases', () => {
  it('creates with 201, answers 200 when it exists, and lists', async () => {
    const created = await put(p.credentials.secret_key, 'shop');
    expect(created.status).toBe(201);
    const body: any = await created.json();
    expect(body).toEqual({ key: 'shop', created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) });
    const again = await put(p.credentials.secret_key, 'shop');
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual(body);
    expect(await list(p.credentials.secret_key)).toContainEqual(body);
  });

  it('takes "/" written %2F and refuses bad names with 400 invalid_name', async () => {
    expect((await put(p.credentials.secret_key, 'tenants%2Feu.west_1-a')).status).toBe(201);
    for (const bad of ['Upper', 'sp%20ace', 'a'.repeat(129), 'a%2F%2Fb', 'x%2F..', '%2Fx']) {
      const res = await put(p.credentials.secret_key, bad);
      expect(res.status, bad).toBe(400);
      expect(((await res.json()) as any).error.code).toBe('invalid_name');
    }
  });

  it("makes an application-bound credential's application the owner; such credentials list only their own", async () => {
    const res = await put(appKey, 'app-a-db');
    expect(res.status).toBe(201);
    expect(((await res.json()) as any).application_id).toMatch(/^app_/);
    const mine = await list(appKey);
    expect(mine.map((d: any) => d.key)).toEqual(['app-a-db']);
    expect(mine[0].application_id).toMatch(/^app_/);
    expect((await list(otherAppKey)).map((d: any) => d.key)).toEqual([]);
    expect((await list(p.credentials.secret_key)).map((d: any) => d.key)).toContain('app-a-db');
  });

  it('needs credentials like every route', async () => {
    expect((await fetch(`${p.urls.data}/v1/databases`)).status).toBe(401);
    expect((await put('aik_' + '0'.repeat(64), 'x')).status).toBe(401);
  });
});
