/**
 * Collection items are fair per organization (issue 32 item 4; docs/decisions/knowledge-fairness.md),
 * through the local platform with a real HTTP client:
 *
 * - processing takes organizations in turn: organization A's 200 queued items never hold organization
 *   B's one item behind them (the knowledge queue's messages are grouped by organization);
 * - admission: an organization has at most KNOWLEDGE_MAX_QUEUED_ITEMS items queued or processing over
 *   all its collections; past it an add (or a re-process) is `429 rate_limited` with `Retry-After`,
 *   another organization is unaffected, a slot frees when an item is done, failed or deleted, or its
 *   collection is, and concurrent adds never pass the cap.
 *
 * Items are cloud items whose embeddings go to a gated upstream here: while the gate is shut, what is
 * added stays queued (or processing, waiting on the upstream), so the order work is taken in is
 * decided by the queue alone once it opens.
 */
import http from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { fakeVector } from '../helpers/fake-embedder.js';
import { closeServer, listen } from '../helpers/servers.js';
import { addItem, call, createCollection, post, settledCollection, settledItem, type Client } from '../helpers/knowledge-calls.js';
import { waitFor } from '../helpers/wait.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { queuedItemsKey } from '../../lambdas/knowledge/collection-keys.js';
import { QUEUE_FULL_RETRY_SECONDS } from '../../lambdas/knowledge/collection-records.js';
import { useSettings } from '../../lambdas/shared/settings.js';

let p: TestPlatform;
let upstream: http.Server;
let upstreamUrl: string;

/** The embeddings upstream: answers at once while open; holds every call while shut. */
const gate = {
  open: true,
  waiting: [] as (() => void)[],
  shut() {
    this.open = false;
  },
  release() {
    this.open = true;
    for (const go of this.waiting.splice(0)) go();
  },
};

interface Org {
  id: string;
  client: Client;
}

async function newOrganization(name: string): Promise<Org> {
  const tenants = new Tenants(p.engine.kv, () => p.engine.clock.now());
  const org = await tenants.createOrganization(name);
  const workspace = await tenants.createWorkspace(org.id, 'main');
  const key = await tenants.createSecretKey(org.id);
  await new ModelRoutes(p.engine.kv, () => p.engine.clock.now()).set(org.id, {
    id: 'emb',
    endpoint: '/v1/embeddings',
    provider: 'openai-compatible',
    base_url: upstreamUrl,
    upstream_model: 'fake-embed',
    timeout_ms: 60_000,
    default: true,
  });
  await createVectorDatabase(p.engine, workspace.id, 'emb');
  return { id: org.id, client: { url: p.urls.ai, key: key.key } };
}

beforeAll(async () => {
  p = await startTestPlatform();
  upstream = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', async () => {
      if (!gate.open) await new Promise<void>((go) => gate.waiting.push(go));
      const body = JSON.parse(raw);
      const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
      const data = inputs.map((s, index) => ({ object: 'embedding', index, embedding: fakeVector(s) }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: 1, total_tokens: 1 } }));
    });
  });
  upstreamUrl = `${await listen(upstream)}/v1`;
}, 60_000);

afterAll(async () => {
  gate.release();
  await p?.close();
  await closeServer(upstream);
});

afterEach(() => {
  gate.release();
  useSettings();
});

const slotsHeld = async (org: Org) => Number((await p.engine.kv.get(queuedItemsKey(org.id)))?.n ?? 0);
const text = (i: number) => ({ text: `Note ${i}: the tide tables of harbour ${i} for the winter season.`, filename: `note-${i}.txt` });

/** Adds `count` items `at` at a time; answers each add's answer in order. */
async function addMany(org: Org, col: string, count: number, at = 8) {
  const answers: Awaited<ReturnType<typeof addItem>>[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: at }, async () => {
      while (next < count) {
        const i = next++;
        answers[i] = await addItem(org.client, col, text(i));
      }
    }),
  );
  return answers;
}

/** Every item of a collection (newest first), all pages. */
async function allItems(org: Org, col: string): Promise<any[]> {
  const items: any[] = [];
  let cursor: string | null = null;
  do {
    const page = await call(org.client, 'GET', `/v1/collections/${col}/items?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(page.status, page.text).toBe(200);
    items.push(...page.body.data);
    cursor = page.body.next_cursor;
  } while (cursor);
  return items;
}

describe('processing takes organizations in turn', () => {
  it("organization B's one item is done before organization A's tenth, though A queued 200 first", async () => {
    const a = await newOrganization('flood');
    const b = await newOrganization('quiet');
    const colA = await createCollection(a.client, 'cloud');
    const colB = await createCollection(b.client, 'cloud');
    gate.shut();
    const added = await addMany(a, colA, 200);
    expect(added.every((r) => r.status === 202)).toBe(true);
    const mine = await addItem(b.client, colB, text(0));
    expect(mine.status, mine.text).toBe(202);
    gate.release();

    const itemB = await settledItem(b.client, colB, mine.body.item_id, 60_000);
    expect(itemB.status).toBe('done');
    await settledCollection(a.client, colA, 120_000);
    const doneA = (await allItems(a, colA)).map((i) => {
      expect(i.status).toBe('done');
      return Date.parse(i.processed_at);
    });
    doneA.sort((x, y) => x - y);
    expect(doneA).toHaveLength(200);
    // B's item is done before A's tenth (in fact within A's first few: those already waiting on the upstream, then one turn each).
    const before = doneA.filter((t) => t < Date.parse(itemB.processed_at)).length;
    expect(before).toBeLessThan(9);
    expect(Date.parse(itemB.processed_at)).toBeLessThan(doneA[9]);
    expect(await slotsHeld(a)).toBe(0);
    expect(await slotsHeld(b)).toBe(0);
  }, 180_000);
});

describe('admission: at most KNOWLEDGE_MAX_QUEUED_ITEMS queued or processing per organization', () => {
  it('the add past the cap is 429 rate_limited with Retry-After; another organization is unaffected; a slot frees when an item is done', async () => {
    useSettings({ knowledgeMaxQueuedItems: 3 });
    const a = await newOrganization('capped');
    const b = await newOrganization('other');
    // The cap is over all of an organization's collections.
    const col1 = await createCollection(a.client, 'cloud');
    const col2 = await createCollection(a.client, 'cloud');
    gate.shut();
    const first = [await addItem(a.client, col1, text(1)), await addItem(a.client, col2, text(2)), await addItem(a.client, col1, text(3))];
    expect(first.map((r) => r.status)).toEqual([202, 202, 202]);
    const refused = await addItem(a.client, col2, text(4));
    expect(refused.status, refused.text).toBe(429);
    expect(refused.body.error).toMatchObject({ code: 'rate_limited', message: expect.stringContaining('3 items queued or processing') });
    expect(refused.headers['retry-after']).toBe(String(QUEUE_FULL_RETRY_SECONDS));
    // Refused, so nothing of it is kept: the collection counts no fourth item.
    expect((await call(a.client, 'GET', `/v1/collections/${col2}`)).body.counts.total).toBe(1);

    const colB = await createCollection(b.client, 'cloud');
    expect((await addItem(b.client, colB, text(1))).status).toBe(202);

    gate.release();
    await settledItem(a.client, col1, first[0].body.item_id);
    await waitFor('a slot to free', async () => (await slotsHeld(a)) < 3, 10_000);
    const again = await addItem(a.client, col2, text(4));
    expect(again.status, again.text).toBe(202);
    await settledCollection(a.client, col1);
    await settledCollection(a.client, col2);
    expect(await slotsHeld(a)).toBe(0);
  }, 60_000);

  it('a failed item frees its slot; a deleted one does; re-processing takes one; deleting a collection gives back all of its', async () => {
    useSettings({ knowledgeMaxQueuedItems: 2 });
    const a = await newOrganization('slots');
    const col = await createCollection(a.client, 'cloud');
    // An item that fails (no parser reads it) gives its slot back too.
    const bad = await addItem(a.client, col, { text: '\u0000\u0001\u0002 binary', filename: 'blob.bin', content_type: 'application/octet-stream' });
    expect((await settledItem(a.client, col, bad.body.item_id)).status).toBe('failed');
    const good = await addItem(a.client, col, text(1));
    expect((await settledItem(a.client, col, good.body.item_id)).status).toBe('done');
    expect(await slotsHeld(a)).toBe(0);

    gate.shut();
    const queued = [await addItem(a.client, col, text(2)), await addItem(a.client, col, text(3))];
    expect(queued.map((r) => r.status)).toEqual([202, 202]);
    // Re-processing a done item needs a slot as an add does.
    const reprocess = await post(a.client, `/v1/collections/${col}/items/${good.body.item_id}/reprocess`, {});
    expect([reprocess.status, reprocess.body.error?.code]).toEqual([429, 'rate_limited']);
    expect(reprocess.headers['retry-after']).toBe(String(QUEUE_FULL_RETRY_SECONDS));
    // Deleting an item in line gives its slot back.
    const waiting = (await allItems(a, col)).find((i) => i.status === 'queued' || i.status === 'processing');
    expect((await call(a.client, 'DELETE', `/v1/collections/${col}/items/${waiting.item_id}`)).status).toBe(200);
    expect(await slotsHeld(a)).toBe(1);
    const redo = await post(a.client, `/v1/collections/${col}/items/${bad.body.item_id}/reprocess`, {});
    expect(redo.status, redo.text).toBe(202);
    expect(await slotsHeld(a)).toBe(2);

    // A whole collection's items leave with it, slots included (another collection's add is admitted again).
    expect((await call(a.client, 'DELETE', `/v1/collections/${col}`)).status).toBe(200);
    expect(await slotsHeld(a)).toBe(0);
    gate.release();
    const other = await createCollection(a.client, 'cloud');
    expect((await addItem(a.client, other, text(9))).status).toBe(202);
    await settledCollection(a.client, other);
    expect(await slotsHeld(a)).toBe(0);
  }, 60_000);

  it('20 adds at once with a cap of 5: exactly 5 are admitted', async () => {
    useSettings({ knowledgeMaxQueuedItems: 5 });
    const a = await newOrganization('burst');
    const col = await createCollection(a.client, 'cloud');
    gate.shut();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => addItem(a.client, col, text(i))));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 202), JSON.stringify(answers.filter((r) => r.status !== 202 && r.status !== 429).map((r) => r.text))).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    expect(await slotsHeld(a)).toBe(5);
    expect((await call(a.client, 'GET', `/v1/collections/${col}`)).body.counts.total).toBe(5);
    gate.release();
    await settledCollection(a.client, col);
    expect(await slotsHeld(a)).toBe(0);
  }, 60_000);
});
