/**
 * eventbridge subscriptions through `npm start` with 2 workers (docs/events/eventbridge.md): what a
 * create and a list answer, with and without an EventBridge endpoint (AWS_ENDPOINT_URL), with the bus
 * registered for the organization (`org eventbridge-allow`) or not; and a publish put on the bus by a
 * local stand-in of EventBridge's PutEvents (JSON 1.1 over HTTP on 127.0.0.1).
 */
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useLocalProcess, type UsedLocalProcess } from '../helpers/local-process.js';
import { closeServer, listen } from '../helpers/servers.js';
import { admin, adminOk } from '../helpers/cli.js';

const BUS = 'arn:aws:events:eu-west-1:123456789012:event-bus/orders';

async function call(p: UsedLocalProcess, method: string, path: string, body?: unknown) {
  const credentials = (await import('node:fs')).readFileSync(`${p.dataDir}/credentials.json`, 'utf8');
  const workspace = JSON.parse(credentials).workspace_id;
  const res = await fetch(`${p.local.urls.events}/v1/workspaces/${workspace}${path}`, {
    method,
    headers: { authorization: `Bearer ${p.key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
}
/** A WebSocket handshake on the subscription's stream: the status and code it is refused with. */
async function streamRefusal(p: UsedLocalProcess, subscriptionId: string): Promise<{ status?: number; code?: string }> {
  const { default: WebSocket } = await import('ws');
  const workspace = JSON.parse((await import('node:fs')).readFileSync(`${p.dataDir}/credentials.json`, 'utf8')).workspace_id;
  const url = `${p.local.urls.events.replace(/^http/, 'ws')}/v1/workspaces/${workspace}/subscriptions/${subscriptionId}/stream`;
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, ['service.v1'], { headers: { authorization: `Bearer ${p.key}` } });
    socket.on('open', () => {
      socket.close();
      reject(new Error('the stream opened'));
    });
    socket.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode, code: JSON.parse(text || '{}').error?.code }));
    });
    socket.on('error', () => undefined);
  });
}

const subscribe = (p: UsedLocalProcess, delivery: Record<string, unknown>) => call(p, 'POST', '/subscriptions', { types: ['order.*'], delivery: { mode: 'eventbridge', ...delivery } });

describe('without an EventBridge endpoint', () => {
  const local = useLocalProcess('events-eventbridge-none-', { LOCAL_WORKERS: '2', EVENTS_RATE_LIMIT_PER_MINUTE: '0' });

  it('refuses an eventbridge subscription with 400 invalid_delivery saying what is needed, even for a registered bus', async () => {
    adminOk(local.dataDir, 'org', 'eventbridge-allow', '--org', local.org, '--arn', BUS);
    const res = await subscribe(local, { event_bus_arn: BUS });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_delivery', param: 'delivery' });
    expect(res.body.error.message).toContain('AWS_ENDPOINT_URL');
    expect((await call(local, 'GET', '/subscriptions')).body.subscriptions).toEqual([]);
  });
});

describe('with an EventBridge endpoint', () => {
  /** What the stand-in received: each PutEvents call's entries. */
  const puts: { Entries: { EventBusName: string; Source: string; DetailType: string; Detail: string }[] }[] = [];
  const endpoint = createServer((req, res) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      const body = JSON.parse(text);
      if (req.headers['x-amz-target'] === 'AWSEvents.PutEvents') puts.push(body);
      res.setHeader('content-type', 'application/x-amz-json-1.1');
      res.end(JSON.stringify({ FailedEntryCount: 0, Entries: body.Entries.map((_: unknown, i: number) => ({ EventId: `id-${puts.length}-${i}` })) }));
    });
  });
  const env: Record<string, string> = { LOCAL_WORKERS: '2', EVENTS_RATE_LIMIT_PER_MINUTE: '0', AWS_ACCESS_KEY_ID: 'local', AWS_SECRET_ACCESS_KEY: 'local' };
  beforeAll(async () => {
    env.AWS_ENDPOINT_URL = await listen(endpoint);
  });
  afterAll(() => closeServer(endpoint));
  const local = useLocalProcess('events-eventbridge-', env);

  it('validates the delivery as documented', async () => {
    const refused = async (delivery: Record<string, unknown>, text: string) => {
      const res = await subscribe(local, delivery);
      expect(res.status, JSON.stringify(delivery)).toBe(400);
      expect(res.body.error.code, JSON.stringify(delivery)).toBe('invalid_delivery');
      expect(res.body.error.message).toContain(text);
    };
    await refused({}, 'event_bus_arn');
    await refused({ event_bus_arn: 'orders' }, 'event bus ARN');
    await refused({ event_bus_arn: 'arn:aws:sqs:eu-west-1:123456789012:queue' }, 'event bus ARN');
    await refused({ event_bus_arn: BUS, url: 'https://example.com/' }, 'takes no url');
    await refused({ event_bus_arn: BUS, detail_type: '' }, 'detail_type');
    await refused({ event_bus_arn: BUS, detail_type: 'x'.repeat(129) }, 'detail_type');
    await refused({ event_bus_arn: BUS, source: 'x' }, 'Unknown delivery field "source"');
    // Well-formed, but not registered for this organization.
    await refused({ event_bus_arn: BUS }, `org eventbridge-allow --org ${local.org} --arn ${BUS}`);
    expect((await call(local, 'GET', '/subscriptions')).body.subscriptions).toEqual([]);
  });

  it('creates and lists a subscription to a registered bus, which is neither pulled nor acked', async () => {
    expect(adminOk(local.dataDir, 'org', 'eventbridge-allow', '--org', local.org, '--arn', BUS)).toMatchObject({ organization_id: local.org, event_bus_arn: BUS });
    expect(adminOk(local.dataDir, 'org', 'eventbridge-list', '--org', local.org).data.map((b: { event_bus_arn: string }) => b.event_bus_arn)).toEqual([BUS]);
    expect(admin(local.dataDir, 'org', 'eventbridge-allow', '--org', local.org, '--arn', 'not-an-arn').status).not.toBe(0);

    const created = await subscribe(local, { event_bus_arn: BUS, detail_type: 'Order' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ types: ['order.*'], delivery: { mode: 'eventbridge', event_bus_arn: BUS, detail_type: 'Order' } });
    expect(created.body.signing_secret).toBeUndefined();
    const plain = await subscribe(local, { event_bus_arn: BUS });
    expect(plain.body.delivery).toEqual({ mode: 'eventbridge', event_bus_arn: BUS });

    const listed = (await call(local, 'GET', '/subscriptions')).body.subscriptions;
    expect(listed.map((s: { delivery: unknown }) => s.delivery)).toEqual([
      { mode: 'eventbridge', event_bus_arn: BUS, detail_type: 'Order' },
      { mode: 'eventbridge', event_bus_arn: BUS },
    ]);
    expect(JSON.stringify(listed)).not.toContain('organization_id');
    const id = created.body.subscription_id;
    expect((await call(local, 'POST', `/subscriptions/${id}/pull`, {})).body.error.code).toBe('wrong_delivery_mode');
    expect((await call(local, 'POST', `/subscriptions/${id}/rotate-secret`)).body.error.code).toBe('wrong_delivery_mode');
    expect((await call(local, 'POST', `/subscriptions/${id}/ack`, { ids: ['evt_01jd0000000000000000000000'] })).body.error.code).toBe('wrong_delivery_mode');
    expect(await streamRefusal(local, id)).toEqual({ status: 409, code: 'wrong_delivery_mode' });
    await call(local, 'DELETE', `/subscriptions/${plain.body.subscription_id}`);
  });

  it('puts a published event on the bus: the envelope as detail, detail_type as DetailType', async () => {
    const published = await call(local, 'POST', '/events', { event: { type: 'order.paid', data: { total: 12 } } });
    expect(published.status).toBe(202);
    const eventId = published.body.accepted[0].event_id;
    const until = Date.now() + 60_000;
    while (!puts.some((p) => p.Entries.some((e) => e.Detail.includes(eventId)))) {
      if (Date.now() > until) throw new Error('no PutEvents for the event');
      await new Promise((r) => setTimeout(r, 50));
    }
    const entry = puts.flatMap((p) => p.Entries).find((e) => e.Detail.includes(eventId))!;
    expect(entry).toMatchObject({ EventBusName: BUS, Source: 'platform.events', DetailType: 'Order' });
    expect(JSON.parse(entry.Detail)).toMatchObject({ event_id: eventId, type: 'order.paid', data: { total: 12 } });
    const until2 = Date.now() + 30_000;
    while ((await call(local, 'GET', '/stats')).body.completed < 1) {
      if (Date.now() > until2) throw new Error('not counted completed');
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 90_000);
});
