/**
 * The calls the cost model prices: the main routes of each API, each as one representative call.
 *
 * Data: database `shop`, collection `items` with a text field and an indexed integer field (a record
 * is its item plus one index entry), records of about 60 bytes; a list reads a page of 20; a batch
 * creates 10; blobs are 1 KiB. Events: a workspace with one webhook subscription and one pull
 * subscription, each on its own event type; a publish carries one 100-byte event to one subscriber.
 * AI: one model route per endpoint on an OpenAI-compatible upstream answering at once (a short chat
 * answer, two 16-dimension embeddings): the model's time and price are not the platform's cost.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import type { QueueMessage } from '../../lambdas/engine/ports.js';
import type { CostPlatform } from './platform.js';
import type { Path } from './pricing.js';

export interface Scenario {
  api: 'Data' | 'Events' | 'AI';
  name: string;
  /** The route id, or the consumer module it runs. */
  runs: string;
  path: Path;
  /** Request body bytes, for API Gateway's 512 KB metering. */
  requestBytes?: number;
  /** Before each call, neither counted nor timed. */
  prepare?: () => Promise<void>;
  call: () => Promise<void>;
  /** SQS requests the call causes outside the handler (the event source mapping's receive and delete). */
  sqsOutside?: number;
}

/** Every API is served through its CloudFront distribution in front of its HTTP API (lib/data-edge.ts, events-edge.ts, ai-edge.ts). */
const EDGE: Path = { httpApi: true, cloudFront: true, invocations: 1 };
/** The Data distribution's file paths also run the upload relay, a Lambda@Edge function of 128 MB (lib/data-edge.ts). */
const FILE_PATH: Path = { ...EDGE, edgeFunctionMb: 128 };
/** An SQS-triggered function: no front door; one invocation per delivery (a quiet queue's batch of one). */
const QUEUE: Path = { httpApi: false, cloudFront: false, invocations: 1 };
/** The event source mapping receives and deletes messages in batches of up to 10 (lib/webhook-delivery.ts): counted at a full batch. */
const MAPPING_SQS_PER_MESSAGE = 2 / 10;

/** An OpenAI-compatible upstream in this process answering fixed bytes, as bench/support/model-upstream.ts does. */
async function modelUpstream(): Promise<{ url: string; close(): Promise<void> }> {
  const completion = JSON.stringify({
    id: 'chatcmpl-costs', object: 'chat.completion', created: 1_700_000_000, model: 'costs-model',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the cost model.' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
  });
  const embeddings = JSON.stringify({
    object: 'list', model: 'costs-embed', usage: { prompt_tokens: 4, total_tokens: 4 },
    data: [0, 1].map((index) => ({ object: 'embedding', index, embedding: Array.from({ length: 16 }, (_, i) => i / 16) })),
  });
  return listen((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(req.url?.endsWith('/embeddings') ? embeddings : completion));
}

/** A webhook receiver answering 200 at once, counting what it received. */
async function receiver(): Promise<{ url: string; received: () => number; close(): Promise<void> }> {
  let received = 0;
  const server = await listen((_req, res) => (received++, res.writeHead(200).end('ok')));
  return { ...server, received: () => received };
}

async function listen(answer: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

/** Sets up the tenant's data and returns the scenarios, with what to close afterwards. */
export async function scenarios(p: CostPlatform): Promise<{ list: Scenario[]; close(): Promise<void> }> {
  const db = '/v1/databases/shop';
  const items = `${db}/collections/items/records`;
  const W = p.credentials.workspace_id;
  const ws = `/v1/workspaces/${W}`;
  const upstream = await modelUpstream();
  const hooks = await receiver();

  // Setup: uncounted.
  p.meter.on = false;
  await p.call('data.databases.put', { path: db, params: { database: 'shop' }, expect: 201 });
  await p.call('data.collections.put', {
    path: `${db}/collections/items`,
    params: { database: 'shop', collection: 'items' },
    body: { fields: [{ name: 'title', type: 'text' }, { name: 'n', type: 'integer', indexed: true }] },
    expect: 201,
  });
  const params = { database: 'shop', collection: 'items' };
  let n = 0;
  const record = () => ({ title: `item number ${n} of the cost model`, n: n++ });
  for (let i = 0; i < 20; i++) await p.call('data.records.create', { path: items, params, body: record(), expect: 201 });
  const one = JSON.parse(String((await p.call('data.records.create', { path: items, params, body: record(), expect: 201 })).body));
  const blob = randomBytes(1024);
  const blobHash = createHash('sha256').update(blob).digest('hex');
  await p.call('data.blobs.put', { path: `${db}/blobs/${blobHash}`, params: { database: 'shop', sha256: blobHash }, body: blob, headers: { 'content-type': 'application/octet-stream' }, expect: 201 });

  const subscribe = async (types: string[], delivery: Record<string, string>) =>
    JSON.parse(String((await p.call('events.subscriptions.create', { path: `${ws}/subscriptions`, params: { workspace_id: W }, body: { types, delivery }, expect: 201 })).body)).subscription_id as string;
  await subscribe(['order.*'], { mode: 'webhook', url: `${hooks.url}/hooks` });
  const pullSub = await subscribe(['task.*'], { mode: 'pull' });
  const event = (type: string) => ({ event: { type, data: { order_id: randomUUID(), amount_cents: 4900, currency: 'USD' } } });
  const publish = (type: string) => p.call('events.events.publish', { path: `${ws}/events`, params: { workspace_id: W }, body: event(type), expect: 202 });

  const org = p.credentials.organization_id;
  const routes = new ModelRoutes(p.bare.kv, () => p.bare.clock.now());
  await routes.set(org, { id: 'costs-chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: `${upstream.url}/v1`, upstream_model: 'costs-model' });
  await routes.set(org, { id: 'costs-embed', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: `${upstream.url}/v1`, upstream_model: 'costs-embed' });
  p.meter.on = true;

  /** The next webhook delivery waiting in the queue, published first when there is none. */
  let delivery: QueueMessage | undefined;
  const nextDelivery = async () => {
    // The event source mapping deletes what the function did not report failed (its requests are `sqsOutside`).
    if (delivery) await p.bare.queue.delete('webhooks', delivery.receipt);
    for (let tries = 0; tries < 2; tries++) {
      const [message] = await p.bare.queue.receive('webhooks', { max: 1, visibilitySeconds: 60 });
      if (message) return void (delivery = message);
      await publish('order.paid');
    }
    throw new Error('a publish queued no webhook delivery');
  };

  const json = (body: unknown) => Buffer.byteLength(JSON.stringify(body));
  const chatBody = () => ({ model: 'costs-chat', messages: [{ role: 'user', content: 'Say hello.' }] });
  const embedBody = () => ({ model: 'costs-embed', input: ['first text', 'second text'] });
  const ai = (routeId: string, path: string, body: unknown) => p.call(routeId, { path, body, headers: { 'x-operation-id': randomUUID() }, expect: 200 });
  let freshBlob = randomBytes(1024);

  const list: Scenario[] = [
    { api: 'Data', name: 'record create', runs: 'data.records.create', path: EDGE, requestBytes: json(record()), call: async () => void (await p.call('data.records.create', { path: items, params, body: record(), expect: 201 })) },
    { api: 'Data', name: 'record get', runs: 'data.records.get', path: EDGE, call: async () => void (await p.call('data.records.get', { path: `${items}/${one.id}`, params: { ...params, id: one.id }, expect: 200 })) },
    { api: 'Data', name: 'record list (20)', runs: 'data.records.list', path: EDGE, call: async () => void (await p.call('data.records.list', { path: items, params, query: { limit: '20' }, expect: 200 })) },
    { api: 'Data', name: 'record update', runs: 'data.records.update', path: EDGE, requestBytes: json({ title: 'renamed' }), call: async () => void (await p.call('data.records.update', { path: `${items}/${one.id}`, params: { ...params, id: one.id }, body: { title: `renamed ${n++}` }, expect: 200 })) },
    {
      api: 'Data', name: 'batch of 10 creates', runs: 'data.batch', path: EDGE, requestBytes: 10 * json(record()),
      call: async () => void (await p.call('data.batch', { path: `${db}/batch`, params: { database: 'shop' }, body: { ops: Array.from({ length: 10 }, () => ({ op: 'create', collection: 'items', data: record() })) }, expect: 200 })),
    },
    {
      api: 'Data', name: 'blob PUT (1 KiB)', runs: 'data.blobs.put', path: FILE_PATH, requestBytes: 1024,
      prepare: async () => void (freshBlob = randomBytes(1024)),
      call: async () => {
        const hash = createHash('sha256').update(freshBlob).digest('hex');
        await p.call('data.blobs.put', { path: `${db}/blobs/${hash}`, params: { database: 'shop', sha256: hash }, body: freshBlob, headers: { 'content-type': 'application/octet-stream' }, expect: 201 });
      },
    },
    { api: 'Data', name: 'blob GET (1 KiB)', runs: 'data.blobs.get', path: FILE_PATH, call: async () => void (await p.call('data.blobs.get', { path: `${db}/blobs/${blobHash}`, params: { database: 'shop', sha256: blobHash }, expect: 200 })) },
    { api: 'Events', name: 'publish (1 event, 1 webhook subscriber)', runs: 'events.events.publish', path: EDGE, requestBytes: json(event('order.paid')), call: async () => void (await publish('order.paid')) },
    {
      api: 'Events', name: 'webhook delivery (the consumer, a batch of one)', runs: 'consumers/webhooks', path: QUEUE, sqsOutside: MAPPING_SQS_PER_MESSAGE,
      prepare: nextDelivery,
      call: async () => {
        const before = hooks.received();
        await p.consume('webhooks', [delivery!]);
        if (hooks.received() !== before + 1) throw new Error('a webhook delivery reached no receiver');
      },
    },
    {
      api: 'Events', name: 'pull (1 message)', runs: 'events.subscriptions.pull', path: EDGE, requestBytes: json({ max: 10, lease_seconds: 30 }),
      prepare: async () => void (await publish('task.due')),
      call: async () => {
        const answer = await p.call('events.subscriptions.pull', { path: `${ws}/subscriptions/${pullSub}/pull`, params: { workspace_id: W, subscription_id: pullSub }, body: { max: 10, lease_seconds: 30 }, expect: 200 });
        if (JSON.parse(String(answer.body)).messages.length !== 1) throw new Error(`a pull answered ${String(answer.body).slice(0, 300)}`);
      },
    },
    { api: 'AI', name: 'chat completion (not streamed)', runs: 'ai.chat.completions', path: EDGE, requestBytes: json(chatBody()), call: async () => void (await ai('ai.chat.completions', '/v1/chat/completions', chatBody())) },
    { api: 'AI', name: 'embeddings (2 inputs)', runs: 'ai.embeddings', path: EDGE, requestBytes: json(embedBody()), call: async () => void (await ai('ai.embeddings', '/v1/embeddings', embedBody())) },
  ];
  return { list, close: async () => void (await Promise.all([upstream.close(), hooks.close()])) };
}
