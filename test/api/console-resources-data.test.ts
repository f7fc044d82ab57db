/**
 * The console API's Data and Events resource routes (issue 37, Deliver 2) through the local server with
 * a real HTTP client and signed-in sessions: databases, collections with schema and rules (the Data
 * API's own refusals, with their `param`), records with filter, sort and paging, files with download;
 * subscriptions (the URL checks' refusals), failed deliveries, dead letters with replay, stats. Then an
 * attacker's pass: another organization's names and ids, crafted ids, prototype-named keys, and XSS
 * payloads stored as values, which come back as data (JSON, under the console's CSP), never as markup.
 */
import http from 'node:http';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordDeadLetter } from '../../lambdas/events/dead-letters.js';
import { deliveryLogWrite } from '../../lambdas/events/delivery-log.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { bearer, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { ConsoleBrowser, expectError, signedInPerson, strangerOwner } from '../helpers/console-browser.js';
import { webhookReceiver } from '../helpers/servers.js';
import { waitFor } from '../helpers/wait.js';

let p: TestPlatform;
let org: string;
let ws: string;
let viewer: ConsoleBrowser;
let developer: ConsoleBrowser;
let stranger: ConsoleBrowser;
let strangerWs: string;
let receiver: http.Server;
let hookBase: string;
let received: Array<{ path: string; body: string }> = [];

const XSS = ['<script>alert(1)</script>', '"><img src=x onerror=alert(document.cookie)>', "javascript:alert('x')", '{{constructor.constructor("alert(1)")()}}'];
const db = '/console/api/databases/shop';

beforeAll(async () => {
  useSettings({ eventsAllowLoopbackWebhooks: true });
  ({ server: receiver, url: hookBase, received } = await webhookReceiver());
  p = await startTestPlatform({ console: true });
  org = p.credentials.organization_id;
  ws = p.credentials.workspace_id;
  viewer = (await signedInPerson(p.engine, p.consoleUrl!, org, 'viewer')).browser;
  developer = (await signedInPerson(p.engine, p.consoleUrl!, org, 'developer')).browser;
  ({ workspaceId: strangerWs, browser: stranger } = await strangerOwner(p.engine, p.consoleUrl!));
});
afterAll(async () => {
  await p?.close();
  await new Promise((r) => receiver.close(r));
  useSettings(undefined);
});

describe('Data: databases, collections, records, files', () => {
  it('creates a database and a collection with schema and rules; a viewer reads them and may not write', async () => {
    expectError(await viewer.call('PUT', db), 403, 'role_forbidden');
    expect((await developer.call('PUT', db)).status).toBe(201);
    expect((await developer.call('PUT', db)).status).toBe(200);
    expect((await viewer.call('GET', '/console/api/databases')).body.databases).toMatchObject([{ key: 'shop' }]);
    const schema = { fields: [{ name: 'title', type: 'text', indexed: true }, { name: 'price', type: 'integer', indexed: true }, { name: 'photo', type: 'blob' }], rules: { list: 'public', view: 'public' } };
    const made = await developer.call('PUT', `${db}/collections/products`, schema);
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({ name: 'products', fields: schema.fields, rules: { list: 'public', view: 'public', create: null } });
    expect((await viewer.call('GET', `${db}/collections/products`)).body).toEqual(made.body);
    expect((await viewer.call('GET', `${db}/collections`)).body.collections).toEqual([made.body]);
    expectError(await viewer.call('PUT', `${db}/collections/other`, {}), 403, 'role_forbidden');
  });

  it("answers the Data API's own refusals of a schema or rule, with the field or rule named for the page", async () => {
    expectError(await developer.call('PUT', `${db}/collections/bad`, { fields: [{ name: 'f', type: 'string' }] }), 400, 'invalid_schema');
    expectError(await developer.call('PUT', `${db}/collections/bad`, { fields: [{ name: 'id', type: 'text' }] }), 400, 'invalid_schema');
    const rule = await developer.call('PUT', `${db}/collections/bad`, { rules: { update: 'owner = "abc' } });
    expectError(rule, 400, 'invalid_rule', 'rules');
    expect(rule.body.error.message).toMatch(/update/);
    expectError(await developer.call('PUT', `${db}/collections/Bad-Name`, {}), 400, 'invalid_name');
    expectError(await developer.call('PUT', '/console/api/databases/UPPER', {}), 400, 'invalid_name');
    expectError(await viewer.call('GET', `${db}/collections/bad`), 404, 'collection_not_found');
  });

  it('creates records and lists them with the Data API\'s filter, sort and cursor; bad queries are its codes', async () => {
    for (const [title, price] of [['apple', 3], ['pear', 5], ['plum', 4], ['fig', 9]] as const) {
      const r = await developer.call('POST', `${db}/collections/products/records`, { title, price });
      expect(r.status, r.text).toBe(201);
    }
    expectError(await viewer.call('POST', `${db}/collections/products/records`, { title: 'x', price: 1 }), 403, 'role_forbidden');
    const cheap = await viewer.call('GET', `${db}/collections/products/records?filter[price][lt]=5&sort=price`);
    expect(cheap.status, cheap.text).toBe(200);
    expect(cheap.body.records.map((r: { title: string }) => r.title)).toEqual(['apple', 'plum']);
    const first = await viewer.call('GET', `${db}/collections/products/records?sort=-price&limit=2`);
    expect(first.body.records.map((r: { title: string }) => r.title)).toEqual(['fig', 'pear']);
    const second = await viewer.call('GET', `${db}/collections/products/records?sort=-price&limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`);
    expect(second.body.records.map((r: { title: string }) => r.title)).toEqual(['plum', 'apple']);
    expectError(await developer.call('POST', `${db}/collections/products/records`, { title: 'x', price: 'cheap' }), 400, 'invalid_value', 'price');
    expectError(await developer.call('POST', `${db}/collections/products/records`, { title: 'x', price: 1, colour: 'red' }), 400, 'unknown_field', 'colour');
    expectError(await viewer.call('GET', `${db}/collections/products/records?filter[photo][eq]=x`), 400, 'invalid_query', 'filter[photo][eq]');
    expectError(await viewer.call('GET', `${db}/collections/products/records?cursor=forged`), 400, 'invalid_query', 'cursor');
    expectError(await viewer.call('GET', `${db}/collections/nope/records`), 404, 'collection_not_found');
    const fig = first.body.records[0];
    expectError(await viewer.call('DELETE', `${db}/collections/products/records/${fig.id}`), 403, 'role_forbidden');
    expect((await developer.call('DELETE', `${db}/collections/products/records/${fig.id}`)).status).toBe(204);
    expectError(await developer.call('DELETE', `${db}/collections/products/records/${fig.id}`), 404, 'record_not_found');
  });

  it('lists the database\'s files and downloads one as an attachment, never rendered on the console\'s origin', async () => {
    const html = Buffer.from('<html><script>alert(document.cookie)</script></html>');
    const sha = createHash('sha256').update(html).digest('hex');
    const put = await fetch(`${p.urls.data}/v1/databases/shop/blobs/${sha}`, { method: 'PUT', headers: bearer(p.credentials.secret_key), body: html });
    expect(put.status).toBe(201);
    const files = await viewer.call('GET', `${db}/blobs`);
    expect(files.status, files.text).toBe(200);
    expect(files.body).toEqual({ files: [{ sha256: sha, size: html.length, created_at: expect.any(String) }], next_cursor: null });
    const got = await viewer.call('GET', `${db}/blobs/${sha}`);
    expect(got.status).toBe(200);
    expect(got.text).toBe(html.toString());
    expect(got.headers.get('content-type')).toBe('application/octet-stream');
    expect(got.headers.get('content-disposition')).toBe(`attachment; filename="${sha}"`);
    expect(got.headers.get('x-content-type-options')).toBe('nosniff');
    expect(got.headers.get('content-security-policy')).toContain("default-src 'self'");
    expectError(await viewer.call('GET', `${db}/blobs/${'0'.repeat(64)}`), 404, 'blob_not_found');
    expectError(await viewer.call('GET', `${db}/blobs/not-a-hash`), 404, 'blob_not_found');
    expectError(await viewer.call('GET', `${db}/blobs?limit=1000`), 400, 'invalid_field', 'limit');
  });
});

describe('Events: subscriptions, deliveries, dead letters, stats', () => {
  const base = () => `/console/api/workspaces/${ws}`;

  it("creates a webhook subscription (its secret once), lists it; the URL checks' refusals are the Events API's codes", async () => {
    expectError(await viewer.call('POST', `${base()}/subscriptions`, { types: ['order.*'], delivery: { mode: 'webhook', url: `${hookBase}/hook` } }), 403, 'role_forbidden');
    const made = await developer.call('POST', `${base()}/subscriptions`, { types: ['order.*'], delivery: { mode: 'webhook', url: `${hookBase}/hook` } });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({ subscription_id: expect.stringMatching(/^sub_/), signing_secret: expect.stringMatching(/^whsec_/) });
    const listed = await viewer.call('GET', `${base()}/subscriptions`);
    expect(listed.body.subscriptions).toMatchObject([{ subscription_id: made.body.subscription_id, types: ['order.*'] }]);
    expect(listed.text).not.toContain(made.body.signing_secret);
    expectError(await developer.call('POST', `${base()}/subscriptions`, { types: ['a.b'], delivery: { mode: 'webhook', url: 'https://user:pw@hooks.example/x' } }), 400, 'url_has_credentials', 'delivery.url');
    expectError(await developer.call('POST', `${base()}/subscriptions`, { types: ['a.b'], delivery: { mode: 'webhook', url: 'https://10.0.0.1/x' } }), 400, 'url_destination_blocked', 'delivery.url');
    expectError(await developer.call('POST', `${base()}/subscriptions`, { types: [], delivery: { mode: 'queue' } }), 400);
    const rotated = await developer.call('POST', `${base()}/subscriptions/${made.body.subscription_id}/rotate-secret`);
    expect(rotated.body.signing_secret).toMatch(/^whsec_/);
  });

  it('shows a failed delivery with its attempts and last error, replays its dead letter to the subscription, counts in stats', async () => {
    const sub = (await viewer.call('GET', `${base()}/subscriptions`)).body.subscriptions[0].subscription_id;
    const published = await fetch(`${p.urls.events}/v1/workspaces/${ws}/events`, {
      method: 'POST',
      headers: { ...bearer(p.credentials.secret_key), 'content-type': 'application/json' },
      body: JSON.stringify({ event: { type: 'order.paid', data: { note: XSS[0], nested: { html: XSS[1] } } } }),
    });
    expect(published.status).toBe(202);
    const eventId = ((await published.json()) as { accepted: { event_id: string }[] }).accepted[0].event_id;
    await waitFor('the first delivery', () => received.some((r) => r.body.includes(eventId)), 5000);
    // The delivery's five failed attempts, as the delivery consumer records them (delivery.ts; driven for real in console-deliveries.test.ts).
    await recordDeadLetter(p.engine, ws, eventId, sub, { attempts: 5, last_error: 'webhook_status_503' });
    await p.engine.kv.transact([deliveryLogWrite(p.engine.clock.now(), { workspaceId: ws, subscriptionId: sub, eventId, status: 'dead', attempt: 5, lastError: 'webhook_status_503' })]);
    const deliveries = await viewer.call('GET', `${base()}/deliveries?subscription_id=${sub}`);
    expect(deliveries.status, deliveries.text).toBe(200);
    expect(deliveries.body).toEqual({ deliveries: [{ event_id: eventId, type: 'order.paid', status: 'dead', attempts: 5, last_error: 'webhook_status_503', last_attempt_at: expect.any(String), next_attempt_at: null }], next_cursor: null });
    const dead = await viewer.call('GET', `${base()}/dead`);
    // The event's data comes back as data, byte for byte, in JSON.
    expect(dead.body.dead[0].event.data).toEqual({ note: XSS[0], nested: { html: XSS[1] } });
    expect(dead.headers.get('content-type')).toMatch(/^application\/json/);
    expectError(await viewer.call('POST', `${base()}/dead/${eventId}/replay`), 403, 'role_forbidden');
    const replay = await developer.call('POST', `${base()}/dead/${eventId}/replay`);
    expect(replay.status, replay.text).toBe(202);
    expect(replay.body).toEqual({ event_id: eventId, replayed: true, queued: [sub] });
    await waitFor('the replayed delivery', () => received.filter((r) => r.body.includes(eventId)).length === 2, 5000);
    expectError(await developer.call('POST', `${base()}/dead/evt_00000000000000000000000000/replay`), 404, 'dead_event_not_found');
    const stats = await viewer.call('GET', `${base()}/stats`);
    expect(stats.status, stats.text).toBe(200);
    expect(stats.body.published).toBeGreaterThanOrEqual(1);
    expectError(await viewer.call('GET', `${base()}/dead?limit=500`), 400, 'invalid_query');
    expectError(await viewer.call('DELETE', `${base()}/subscriptions/${sub}`), 403, 'role_forbidden');
    expect((await developer.call('DELETE', `${base()}/subscriptions/${sub}`)).status).toBe(204);
    expect((await viewer.call('GET', `${base()}/subscriptions`)).body.subscriptions).toEqual([]);
  });
});

describe("an attacker's pass", () => {
  it("one organization's person reaches none of another's databases, workspaces or subscriptions", async () => {
    expect((await stranger.call('GET', '/console/api/databases')).body.databases).toEqual([]);
    // Database names are the organization's own: the same name is another database (none here).
    expectError(await stranger.call('GET', `${db}/collections/products/records`), 404, 'database_not_found');
    expectError(await stranger.call('GET', `${db}/collections`), 404, 'database_not_found');
    const sha = createHash('sha256').update('<html><script>alert(document.cookie)</script></html>').digest('hex');
    expectError(await stranger.call('GET', `${db}/blobs/${sha}`), 404, 'database_not_found');
    for (const path of ['subscriptions', 'dead', 'stats', 'deliveries', 'vector-database']) {
      expectError(await stranger.call('GET', `/console/api/workspaces/${ws}/${path}`), 403, 'forbidden');
    }
    expectError(await stranger.call('POST', `/console/api/workspaces/${ws}/subscriptions`, { types: ['a.b'], delivery: { mode: 'queue' } }), 403, 'forbidden');
    expectError(await developer.call('GET', `/console/api/workspaces/${strangerWs}/subscriptions`), 403, 'forbidden');
    // Crafted workspace ids: the same one refusal.
    for (const id of ['__proto__', 'ws_' + '0'.repeat(26), '..%2F..', '%00']) {
      expectError(await developer.call('GET', `/console/api/workspaces/${id}/stats`), 403, 'forbidden');
    }
  });

  it('crafted names and ids are the domain\'s 400 or 404, never a 500', async () => {
    for (const name of ['__proto__', '..', '%2e%2e%2f', 'a%00b', 'constructor%2Fprototype', 'x'.repeat(300)]) {
      const r = await developer.call('PUT', `/console/api/databases/${name}`);
      expect([200, 201, 400, 404], `${name}: ${r.text}`).toContain(r.status);
      const c = await viewer.call('GET', `${db}/collections/${name}`);
      expect([400, 404], `${name}: ${c.text}`).toContain(c.status);
      const rec = await developer.call('DELETE', `${db}/collections/products/records/${name}`);
      expect([400, 404], `${name}: ${rec.text}`).toContain(rec.status);
    }
  });

  it('prototype-named keys are refused or kept as plain data, never merged into an object', async () => {
    expectError(await developer.call('POST', `${db}/collections/products/records`, '{"title":"x","price":1,"__proto__":{"admin":true}}'), 400, 'reserved_field');
    expect((await developer.call('PUT', `${db}/collections/free`, { mode: 'free' })).status).toBe(201);
    const record = await developer.call('POST', `${db}/collections/free/records`, { constructor: 'c', toString: 'not a function', hasOwnProperty: 1, prototype: { polluted: true } });
    expect(record.status, record.text).toBe(201);
    expect(record.body).toMatchObject({ constructor: 'c', toString: 'not a function', hasOwnProperty: 1, prototype: { polluted: true } });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // Bodies of the console's own routes: unknown fields, whatever their names.
    const tried = await developer.call('POST', `/console/api/workspaces/${ws}/subscriptions`, '{"types":["a.b"],"delivery":{"mode":"queue"},"__proto__":{"types":["*"]}}');
    expectError(tried, 400, 'unknown_field');
    // The console's own bodies are strict: `__proto__` is an unknown field like any other.
    expectError(await developer.call('PUT', '/console/api/routes/x', '{"endpoint":"/v1/embeddings","provider":"bedrock","__proto__":{"default":true}}'), 400, 'unknown_field', '__proto__');
    const sneaky = await developer.call('PUT', `${db}/collections/products`, '{"fields":[],"__proto__":{"rules":{"list":"public"}}}');
    expectError(sneaky, 400, 'invalid_body', '__proto__');
  });

  it('XSS payloads stored as values come back as the same strings in JSON under the console\'s CSP', async () => {
    const made = await developer.call('POST', `${db}/collections/free/records`, { html: XSS[0], attr: XSS[1], url: XSS[2], template: XSS[3] });
    expect(made.status, made.text).toBe(201);
    const list = await viewer.call('GET', `${db}/collections/free/records?limit=100`);
    expect(list.headers.get('content-type')).toMatch(/^application\/json/);
    expect(list.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(list.headers.get('x-content-type-options')).toBe('nosniff');
    const found = list.body.records.find((r: { id: string }) => r.id === made.body.id);
    expect(found).toMatchObject({ html: XSS[0], attr: XSS[1], url: XSS[2], template: XSS[3] });
    // A route's name with markup is refused by the route id's rule; a rerank profile's too.
    expectError(await developer.call('PUT', `/console/api/routes/${encodeURIComponent('<b>x</b>')}`, { endpoint: '/v1/chat/completions', provider: 'bedrock' }), 400, 'invalid_body');
    expectError(await developer.call('PUT', `/console/api/rerank-profiles/${encodeURIComponent('<svg onload=alert(1)>')}`, { provider: 'bedrock', model: 'm' }), 400, 'invalid_body');
  });
});
