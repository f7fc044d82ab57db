/**
 * Events API edges, through `npm start` with two workers: an event's data nesting is checked per
 * event (a deep event never blocks the others, a body nesting 100,000 levels is a 400, never a 500);
 * `?__proto__=1` is an unknown query like any other; rotate-secret refuses fields; a server
 * credential never opens a stream from a `bearer.` subprotocol.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { useLocalProcess } from '../helpers/local-process.js';
import { callApi, expectError, ok } from '../helpers/data-api.js';
import { bearer } from '../helpers/platform.js';

const p = useLocalProcess('events-edges-', { LOCAL_WORKERS: '2' });
const workspace = () => JSON.parse(readFileSync(join(p.dataDir, 'credentials.json'), 'utf8')).workspace_id as string;
const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  callApi(p.local.urls.events, bearer(p.key), method, `/v1/workspaces/${workspace()}${path}`, body, headers);

/** The documented depth limit of an event's data (docs/events/reference.md). */
const MAX_DATA_DEPTH = 128;
/** JSON text of `levels` nested arrays around a 1 (levels 0: the 1 alone). */
const nested = (levels: number) => '['.repeat(levels) + '1' + ']'.repeat(levels);

describe('an event nesting deep is rejected on its own', () => {
  it('accepts a batch of a good event and one whose data nests 62 levels', async () => {
    const body = `{"events":[{"type":"edge.good","data":1},{"type":"edge.deep","data":${nested(62)}}]}`;
    const r = await ok(call('POST', '/events', body), 202);
    expect(r.rejected).toEqual([]);
    expect(r.accepted).toHaveLength(2);
  });

  it(`accepts data nesting ${MAX_DATA_DEPTH} levels; rejects only the event nesting deeper (invalid_event)`, async () => {
    const body = `{"events":[{"type":"edge.at","data":${nested(MAX_DATA_DEPTH)}},{"type":"edge.over","data":${nested(MAX_DATA_DEPTH + 1)}},{"type":"edge.good","data":{"a":1}}]}`;
    const r = await ok(call('POST', '/events', body), 202);
    expect(r.rejected).toEqual([{ index: 1, code: 'invalid_event' }]);
    expect(r.accepted.map((a: any) => a.duplicate)).toEqual([false, false]);
  });

  it('rejects an event whose data nests 100,000 levels, accepting the others (no crash, no 500)', async () => {
    const body = `{"events":[{"type":"edge.good","data":1},{"type":"edge.huge","data":${nested(100_000)}},{"type":"edge.good","data":2}]}`;
    const r = await ok(call('POST', '/events', body), 202);
    expect(r.rejected).toEqual([{ index: 1, code: 'invalid_event' }]);
    expect(r.accepted).toHaveLength(2);
  });

  it('answers 400 invalid_body to a body nesting 100,000 levels, and keeps serving', async () => {
    expectError(await call('POST', '/events', nested(100_000)), 400, 'invalid_body');
    expectError(await call('POST', '/events', `{"events":[{"type":"edge.good","data":1}],"x":${nested(100_000)}}`), 400, 'invalid_body');
    // Other routes keep the 64-level body cap.
    expectError(await call('POST', '/subscriptions', `{"types":["a"],"delivery":${nested(100_000)}}`), 400, 'invalid_body');
    const r = await ok(call('POST', '/events', { event: { type: 'edge.after', data: 1 } }), 202);
    expect(r.accepted).toHaveLength(1);
  });
});

describe('__proto__ and other Object.prototype names are unknown query parameters', () => {
  it('answers 400 invalid_query on /stats and /dead', async () => {
    for (const q of ['__proto__=1', 'constructor=1', 'toString=1', 'hasOwnProperty=x']) {
      const stats = await call('GET', `/stats?${q}`);
      expectError(stats, 400, 'invalid_query', `stats?${q}`);
      expect(stats.body.error.param).toBe(q.split('=')[0]);
      expectError(await call('GET', `/dead?${q}`), 400, 'invalid_query', `dead?${q}`);
      expectError(await call('GET', `/dead?limit=5&${q}`), 400, 'invalid_query', `dead?limit=5&${q}`);
    }
    await ok(call('GET', '/stats'));
    await ok(call('GET', '/dead?limit=5'));
  });
});

describe('decision: rotate-secret takes no fields', () => {
  it('refuses an unknown field with 400 unknown_field; no body or {} rotates', async () => {
    const sub = (await ok(call('POST', '/subscriptions', { types: ['edge.*'], delivery: { mode: 'webhook', url: 'https://93.184.215.14/hooks' } }), 201)).subscription_id;
    const refused = await call('POST', `/subscriptions/${sub}/rotate-secret`, { previous_valid_hours: 1 });
    expectError(refused, 400, 'unknown_field');
    expect(refused.body.error.param).toBe('previous_valid_hours');
    expectError(await call('POST', `/subscriptions/${sub}/rotate-secret`, '[]'), 400, 'invalid_body');
    const a = await ok(call('POST', `/subscriptions/${sub}/rotate-secret`));
    const b = await ok(call('POST', `/subscriptions/${sub}/rotate-secret`, {}));
    expect(a.signing_secret).toMatch(/^whsec_/);
    expect(b.signing_secret).not.toBe(a.signing_secret);
  });
});

describe('decision: a server credential is never taken from a bearer. subprotocol', () => {
  /** Opens the stream; resolves with 101 (and closes it) or the refusal's status and code. */
  const open = (sub: string, protocols: string[], headers: Record<string, string> = {}): Promise<{ status: number; code?: string }> =>
    new Promise((resolve, reject) => {
      const url = `${p.local.urls.events.replace(/^http/, 'ws')}/v1/workspaces/${workspace()}/subscriptions/${sub}/stream`;
      const ws = new WebSocket(url, protocols, { headers });
      ws.once('open', () => {
        ws.close();
        resolve({ status: 101 });
      });
      ws.once('unexpected-response', (_req, res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, code: text ? JSON.parse(text).error?.code : undefined }));
      });
      ws.once('error', reject);
    });

  it('refuses a secret key sent as bearer.<key> without Origin (403 secret_key_in_browser); the Authorization header opens', async () => {
    const sub = (await ok(call('POST', '/subscriptions', { types: ['edge.ws'], delivery: { mode: 'websocket' } }), 201)).subscription_id;
    expect(await open(sub, ['service.v1', `bearer.${p.key}`])).toEqual({ status: 403, code: 'secret_key_in_browser' });
    expect(await open(sub, ['service.v1', `bearer.${p.key}`], bearer(p.key))).toEqual({ status: 403, code: 'secret_key_in_browser' });
    expect(await open(sub, ['service.v1'], bearer(p.key))).toEqual({ status: 101 });
  });
});
