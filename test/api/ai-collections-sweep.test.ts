/**
 * Expired collections are swept without any new create (docs/decisions/knowledge-collections.md): the
 * local runtime's workers run the sweep on their timer (lambdas/local/queue-workers.ts), as the
 * scheduled function does on AWS (lambdas/consumers/collections-sweep.ts). On a clock the test moves:
 * once a collection's retention has passed, its item and its sweep entry go with no request to the platform.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { postWithOperation } from '../helpers/ai-calls.js';
import { waitFor } from '../helpers/wait.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import type { Clock } from '../../lambdas/engine/ports.js';
import { COLLECTION_SWEEP_PARTITION } from '../../lambdas/knowledge/collection-keys.js';

/** Real time plus what the test adds: the workers' timer still runs in real time. */
let offsetMs = 0;
const clock: Clock = { now: () => systemClock.now() + offsetMs, sleep: systemClock.sleep };

let p: TestPlatform;
let key: string;

beforeAll(async () => {
  p = await startTestPlatform({ clock });
  key = p.credentials.secret_key;
});

afterAll(async () => {
  await p?.close();
});

it('removes an expired collection\'s records with no new create', async () => {
  const created = await postWithOperation(p.urls.ai, key, '/v1/collections', `op-${randomUUID()}`, { mode: 'download', name: 'Short-lived' });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const entries = async () => (await p.engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION })).items.filter((i) => String(i.sk).endsWith(`#${id}`));
  expect(await entries()).toHaveLength(1);
  const [entry] = await entries();
  const [, org, workspace] = String(entry.sk).split('#');
  // The live item, read past the store's expiry (a read through the port hides it once expired).
  const itemPresent = async () => (await p.engine.kv.query({ pk: `kcol#${org}#${workspace}` })).items.some((i) => i.sk === id);
  expect(await itemPresent()).toBe(true);

  offsetMs += Date.parse(created.body.expires_at) - systemClock.now() + 1000;
  await waitFor('the sweep to remove the expired collection', async () => (await entries()).length === 0, 20_000, 200);
  // Gone from the store, not just hidden by its expiry.
  offsetMs = 0;
  expect(await itemPresent()).toBe(false);
}, 60_000);
