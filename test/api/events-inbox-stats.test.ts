/**
 * Inbox counts and leases, through `npm start` with two workers: depth leaves with a deleted
 * subscription's messages; an ack holds only under the lease it names (a stale or never-leased ack
 * acknowledges nothing and says why); leased messages never hide the waiting ones from a pull.
 */
import { describe, expect, it } from 'vitest';
import { useLocalProcess } from '../helpers/local-process.js';
import { waitFor } from '../helpers/wait.js';

const used = useLocalProcess('events-inbox-stats-', { LOCAL_WORKERS: '2', EVENTS_RATE_LIMIT_PER_MINUTE: '0' });

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const { workspace_id } = await workspace();
  const res = await fetch(`${used.local.urls.events}/v1/workspaces/${workspace_id}${path}`, {
    method,
    headers: { authorization: `Bearer ${used.key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
let ws: { workspace_id: string } | undefined;
async function workspace() {
  if (!ws) {
    const { readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    ws = JSON.parse(readFileSync(join(used.dataDir, 'credentials.json'), 'utf8')) as { workspace_id: string };
  }
  return ws;
}
async function ok(method: string, path: string, body?: unknown, status = 200) {
  const res = await call(method, path, body);
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  return res.body;
}
const subscribe = async (types: string[]) => (await ok('POST', '/subscriptions', { types, delivery: { mode: 'pull' } }, 201)).subscription_id as string;
const publish = async (type: string, n: number): Promise<string[]> =>
  (await ok('POST', '/events', { events: Array.from({ length: n }, (_, i) => ({ type, data: i })) }, 202)).accepted.map((a: any) => a.event_id);
const pull = async (sub: string, body: Record<string, unknown>) => (await ok('POST', `/subscriptions/${sub}/pull`, body)).messages as any[];
const ack = (sub: string, ids: string[]) => ok('POST', `/subscriptions/${sub}/ack`, { ids });
const stats = () => ok('GET', '/stats');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('stats', () => {
  it('depth leaves with the messages of deleted subscriptions, and never goes below what waits', async () => {
    const before = await stats();
    const [a, b] = [await subscribe(['gone.*']), await subscribe(['gone.*'])];
    await publish('gone.x', 10);
    expect((await stats()).depth - before.depth).toBe(20);
    // Some of a's acked first: deleting counts only what still waits.
    const leased = await pull(a, { max: 3, lease_seconds: 300 });
    expect((await ack(a, leased.map((m) => m.event_id))).acked).toBe(3);
    const mid = await stats();
    expect(mid.depth - before.depth).toBe(17);
    expect(mid.completed - before.completed).toBe(3);
    await ok('DELETE', `/subscriptions/${a}`, undefined, 204);
    await ok('DELETE', `/subscriptions/${b}`, undefined, 204);
    const after = await stats();
    expect(after.depth).toBe(before.depth);
    expect(after.completed - before.completed).toBe(3);
    expect(after.published - before.published).toBe(10);
    // Acks of the deleted subscription's messages find nothing: no count moves.
    expect((await call('POST', `/subscriptions/${a}/ack`, { ids: leased.map((m) => m.event_id) })).status).toBe(404);
    expect((await stats()).depth).toBe(before.depth);
  });
});

describe('acks and leases', () => {
  it("a late ack of an ended lease removes nothing when another consumer holds the message; the holder's ack does", async () => {
    const sub = await subscribe(['lease.*']);
    const [id] = await publish('lease.x', 1);
    const [first] = await pull(sub, { max: 1, lease_seconds: 5 });
    expect([first.event_id, first.delivery_count, first.lease_id]).toEqual([id, 1, `${id}.1`]);
    // A pull finds nothing until the lease ends, then takes the message again.
    let second: any;
    await waitFor('the lease to end', async () => (second = (await pull(sub, { max: 1, lease_seconds: 300 }))[0]) !== undefined, 10_000, 100);
    expect([second.event_id, second.delivery_count, second.lease_id]).toEqual([id, 2, `${id}.2`]);
    // Consumer A's late ack, by its lease: stale.
    expect(await ack(sub, [first.lease_id])).toEqual({ acked: 0, not_acked: [{ id: first.lease_id, reason: 'stale_lease' }] });
    const before = await stats();
    expect(await ack(sub, [second.lease_id])).toEqual({ acked: 1, not_acked: [] });
    const after = await stats();
    expect([after.completed - before.completed, after.depth - before.depth]).toEqual([1, -1]);
  });

  it('an ack of a message nobody leased, or whose lease ended, acknowledges nothing and says so', async () => {
    const sub = await subscribe(['never.*']);
    const [a, b] = await publish('never.x', 2);
    const before = await stats();
    expect(await ack(sub, [a, 'evt_00000000000000000000000000'])).toEqual({
      acked: 0,
      not_acked: [
        { id: a, reason: 'not_leased' },
        { id: 'evt_00000000000000000000000000', reason: 'not_found' },
      ],
    });
    const [m] = await pull(sub, { max: 1, lease_seconds: 5 });
    const leasedBy = Date.now();
    expect(m.event_id).toBe(a);
    // The lease ends 5 s after the server took it, by the clock this machine shares with the server.
    // (A pull would end the wait sooner but take the message again.)
    await sleep(leasedBy + 5_000 + 100 - Date.now());
    expect(await ack(sub, [a])).toEqual({ acked: 0, not_acked: [{ id: a, reason: 'lease_expired' }] });
    expect(await stats()).toMatchObject({ depth: before.depth, completed: before.completed });
    // Both still wait: the unacked one comes again, the never-leased one once.
    const again = await pull(sub, { max: 10, lease_seconds: 300 });
    expect(again.map((x) => [x.event_id, x.delivery_count])).toEqual([
      [a, 2],
      [b, 1],
    ]);
    expect(await ack(sub, [a, b])).toEqual({ acked: 2, not_acked: [] });
  });
});

describe('leased messages never hide waiting ones', () => {
  it('with 2,000 leased and 5,000 waiting, every pull answers the oldest waiting ones', async () => {
    const sub = await subscribe(['bulk.*']);
    const ids: string[] = [];
    for (let i = 0; i < 70; i++) ids.push(...(await publish('bulk.x', 100)));
    // 2,000 leased and never acked.
    for (let i = 0; i < 20; i++) expect((await pull(sub, { max: 100, lease_seconds: 300 })).length).toBe(100);
    // The 5,000 others, oldest first, 100 a pull, none empty.
    const got: string[] = [];
    const times: number[] = [];
    for (let i = 0; i < 50; i++) {
      const started = performance.now();
      const messages = await pull(sub, { max: 100, lease_seconds: 300 });
      times.push(performance.now() - started);
      expect(messages.length, `pull ${i}`).toBe(100);
      got.push(...messages.map((m) => m.event_id));
    }
    expect(got).toEqual(ids.slice(2_000));
    expect(await pull(sub, { max: 100 })).toEqual([]);
    const depth = (await stats()).depth;
    expect(depth).toBeGreaterThanOrEqual(7_000);
    // The last pulls (behind 6,900 leased messages) cost about what the first ones did.
    const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
    expect(median(times.slice(-10))).toBeLessThan(median(times.slice(0, 10)) * 5 + 200);
  }, 300_000);
});
