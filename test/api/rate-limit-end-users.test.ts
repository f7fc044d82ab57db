/**
 * An end user's rate-limit count belongs to its organization and application. Two
 * applications of two organizations may both call a user "user-1"; the count was keyed by that id
 * alone, so one used up the other's calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { useSettings } from '../../lambdas/shared/settings.js';

let p: TestPlatform;

beforeAll(async () => {
  // The chain reads the limit when a route's function is built: set it before the platform starts.
  useSettings({ dataRateLimitPerMinute: 2 });
  p = await startTestPlatform();
});
afterAll(async () => {
  useSettings();
  await p?.close();
});

/** An end-user token for `user-1` of a new application in a new organization. */
async function endUserOfNewOrganization(name: string): Promise<string> {
  const t = new Tenants(p.engine.kv, () => Date.now());
  const org = await t.createOrganization(name);
  const ws = await t.createWorkspace(org.id, 'w');
  const app = await t.createApplication(ws.id, 'a', []);
  const appKey = (await t.createSecretKey(org.id, app.id)).key;
  const minted = await fetch(`${p.urls.data}/v1/end-user-tokens`, {
    method: 'POST',
    headers: { ...bearer(appKey), 'content-type': 'application/json' },
    body: JSON.stringify({ user_id: 'user-1' }),
  });
  expect(minted.status).toBe(200);
  return ((await minted.json()) as { token: string }).token;
}

describe('end users of two organizations with one user id', () => {
  it('have a count each', async () => {
    const a = await endUserOfNewOrganization('A');
    const b = await endUserOfNewOrganization('B');
    const list = async (token: string) => (await fetch(`${p.urls.data}/v1/probe`, { headers: bearer(token) })).status;
    expect([await list(a), await list(a), await list(a)]).toEqual([404, 404, 429]);
    // Before the fix b shared a's count: 429 at once.
    expect([await list(b), await list(b), await list(b)]).toEqual([404, 404, 429]);
  });
});
