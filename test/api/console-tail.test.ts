/**
 * The console's live tail (issue 37, Deliver 2: Events "a live tail of a stream") through the local
 * server: events published with a secret key through the Events API are read back in order after a
 * cursor by a signed-in viewer, and nothing is consumed (a pull subscription still receives every one
 * afterwards). Another organization's workspace gets the Events API's one refusal; crafted cursors and
 * limits are 400 invalid_query, never a 500. The engine's clock is a manual one: the tail returns an
 * event once it is EVENT_LOG_SETTLE_MS old, so the test moves time rather than waiting.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { EVENT_LOG_SETTLE_MS, eventLogAnswerSchema } from '../../lambdas/events/event-log.js';
import { bearer, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { callApi, ok } from '../helpers/data-api.js';
import { ConsoleBrowser, expectError, signedInPerson, strangerOwner } from '../helpers/console-browser.js';

let p: TestPlatform;
let clock: ManualClock;
let W: string;
let viewer: ConsoleBrowser;
let stranger: ConsoleBrowser;
let otherWorkspace: string;

const events = (method: string, path: string, body?: unknown) => callApi(p.urls.events, bearer(p.credentials.secret_key), method, `/v1/workspaces/${W}${path}`, body);
const publish = async (...list: Array<{ type: string; data: unknown }>): Promise<string[]> => {
  const answer = await ok(events('POST', '/events', { events: list }), 202);
  expect(answer.rejected).toEqual([]);
  return answer.accepted.map((a: { event_id: string }) => a.event_id);
};
const tail = (who: ConsoleBrowser, q = '', workspace = W) => who.call('GET', `/console/api/workspaces/${workspace}/events/tail${q}`);
async function tailOk(q = ''): Promise<{ events: Array<Record<string, any>>; next_cursor: string; has_more: boolean }> {
  const res = await tail(viewer, q);
  expect(res.status, res.text).toBe(200);
  // The answer's shape, envelopes included, is the one the reader declares (the Events API's envelope).
  expect(eventLogAnswerSchema()['~standard'].validate(res.body)).not.toHaveProperty('issues');
  return res.body;
}
const settle = () => clock.advance(EVENT_LOG_SETTLE_MS + 1);

beforeAll(async () => {
  clock = new ManualClock(Date.now());
  p = await startTestPlatform({ console: true, clock });
  W = p.credentials.workspace_id;
  viewer = (await signedInPerson(p.engine, p.consoleUrl!, p.credentials.organization_id, 'viewer')).browser;
  ({ workspaceId: otherWorkspace, browser: stranger } = await strangerOwner(p.engine, p.consoleUrl!));
});
afterAll(async () => {
  await p?.close();
});

describe('the console live tail', () => {
  it('shows published events in order after a cursor, consuming nothing: a pull subscription still receives every one', async () => {
    const sub = await ok(events('POST', '/subscriptions', { types: ['tail.*'], delivery: { mode: 'pull' } }), 201);
    // An empty workspace: no events, and a cursor to continue from.
    const empty = await tailOk();
    expect(empty).toMatchObject({ events: [], has_more: false });

    const first = await publish({ type: 'tail.one', data: { n: 1 } }, { type: 'tail.two', data: [2, '<b>two</b>'] });
    // Not yet settled: a publish commits after its ids are taken, so the tail waits before it shows them.
    expect((await tailOk(`?after=${empty.next_cursor}`)).events).toEqual([]);
    settle();
    const a = await tailOk(`?after=${empty.next_cursor}`);
    expect(a.events.map((e) => e.event_id)).toEqual(first);
    expect(a.events[1]).toMatchObject({ type: 'tail.two', data: [2, '<b>two</b>'], tenant: { workspace_id: W }, idempotency_key: first[1] });
    expect(a.next_cursor).toBe(first[1]);

    const second = await publish(...Array.from({ length: 5 }, (_, i) => ({ type: 'tail.many', data: i })));
    settle();
    // Paged by the limit, each page after the last one shown.
    const b = await tailOk(`?after=${a.next_cursor}&limit=3`);
    expect(b.events.map((e) => e.event_id)).toEqual(second.slice(0, 3));
    expect(b.has_more).toBe(true);
    const c = await tailOk(`?after=${b.next_cursor}&limit=3`);
    expect(c.events.map((e) => e.event_id)).toEqual(second.slice(3));
    expect(c.has_more).toBe(false);
    const d = await tailOk(`?after=${c.next_cursor}`);
    expect(d).toEqual({ events: [], next_cursor: c.next_cursor, has_more: false });
    // Without a cursor: the newest `limit`, oldest first.
    expect((await tailOk('?limit=4')).events.map((e) => e.event_id)).toEqual([...first, ...second].slice(-4));

    // Every tail read above left the subscription's inbox whole: the pull gets all seven, as the tail showed them.
    const pulled = await ok(events('POST', `/subscriptions/${sub.subscription_id}/pull`, { max: 100 }));
    expect(pulled.messages.map((m: { event_id: string }) => m.event_id)).toEqual([...first, ...second]);
    const { delivery_count: _count, lease_id: _lease, ...envelope } = pulled.messages[1];
    expect(a.events[1]).toEqual(envelope);
    await ok(events('DELETE', `/subscriptions/${sub.subscription_id}`), 204);
  });

  it("refuses another organization's workspace as the other workspace routes do, and a caller with no session", async () => {
    expectError(await tail(stranger), 403, 'forbidden');
    expectError(await tail(stranger, '?limit=1'), 403, 'forbidden');
    // Its own workspace reads (empty), another's is refused the same whether it exists or not.
    expect((await tail(stranger, '', otherWorkspace)).status).toBe(200);
    expectError(await tail(viewer, '', otherWorkspace), 403, 'forbidden');
    expectError(await tail(viewer, '', 'ws_00000000000000000000000000'), 403, 'forbidden');
    expectError(await new ConsoleBrowser(p.consoleUrl!).call('GET', `/console/api/workspaces/${W}/events/tail`), 401, 'not_signed_in');
  });

  it('answers crafted cursors and limits with 400 invalid_query, never a 500', async () => {
    const id = (await tailOk('?limit=1')).events[0].event_id as string;
    for (const after of ['x', 'evt_', `${id}x`, id.toUpperCase(), `evt_${'z'.repeat(25)}!`, '../../x', `${id}%00`, `${id},${id}`, '']) {
      expectError(await tail(viewer, `?after=${encodeURIComponent(after)}`), 400, 'invalid_query', 'after');
    }
    expectError(await tail(viewer, `?after=${id}&after=${id}`), 400, 'invalid_query');
    for (const limit of ['0', '101', '-1', '1.5', 'abc', '1e2', '9'.repeat(40)]) {
      expectError(await tail(viewer, `?limit=${encodeURIComponent(limit)}`), 400, 'invalid_query', 'limit');
    }
    expectError(await tail(viewer, '?cursor=abc'), 400, 'invalid_query');
    // Well-formed ids that no event has: the lowest and the highest read as any other cursor.
    expect((await tailOk(`?after=evt_${'0'.repeat(26)}&limit=100`)).events.length).toBe(7);
    expect(await tailOk(`?after=evt_${'z'.repeat(26)}`)).toEqual({ events: [], next_cursor: `evt_${'z'.repeat(26)}`, has_more: false });
  });

  it('forgets events past their retention (30 days)', async () => {
    clock.advance(31 * 24 * 3600 * 1000);
    // The old session's absolute age is over: a new viewer reads.
    viewer = (await signedInPerson(p.engine, p.consoleUrl!, p.credentials.organization_id, 'viewer')).browser;
    expect((await tailOk(`?after=evt_${'0'.repeat(26)}&limit=100`)).events).toEqual([]);
  });
});
