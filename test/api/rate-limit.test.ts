/** 429 rate_limited per credential (spec 8: Events 600 calls a minute; Data configurable). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { Tenants } from '../../lambdas/auth/tenants.js';

let p: TestPlatform;
let clock: ManualClock;

beforeAll(async () => {
  clock = new ManualClock(Date.now());
  p = await startTestPlatform({ clock });
});
afterAll(async () => {
  delete process.env.DATA_RATE_LIMIT_PER_MINUTE;
  await p?.close();
});

const newKey = async () => (await new Tenants(p.engine.kv, () => clock.now()).createSecretKey(p.credentials.organization_id)).key;

describe('rate limits', () => {
  it('answers 429 rate_limited with Retry-After on the Events API past 600 calls a minute, per credential, and refills', async () => {
    const key = await newKey();
    const other = await newKey();
    const statuses: number[] = [];
    for (let i = 0; i < 601; i++) statuses.push((await fetch(`${p.urls.events}/v1/probe`, { headers: bearer(key) })).status);
    expect(statuses.slice(0, 600).every((s) => s === 404)).toBe(true);
    const limited = await fetch(`${p.urls.events}/v1/probe`, { headers: bearer(key) });
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as any).error).toMatchObject({ code: 'rate_limited', type: 'rate_limit_error' });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Another credential has its own bucket.
    expect((await fetch(`${p.urls.events}/v1/probe`, { headers: bearer(other) })).status).toBe(404);
    clock.advance(1000); // 10 calls' worth
    expect((await fetch(`${p.urls.events}/v1/probe`, { headers: bearer(key) })).status).toBe(404);
  });

  it('limits the Data API only when DATA_RATE_LIMIT_PER_MINUTE is set', async () => {
    const key = await newKey();
    for (let i = 0; i < 50; i++) expect((await fetch(`${p.urls.data}/v1/databases`, { headers: bearer(key) })).status).toBe(200);
    process.env.DATA_RATE_LIMIT_PER_MINUTE = '5';
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await fetch(`${p.urls.data}/v1/databases`, { headers: bearer(key) })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  });
});
