/**
 * Real things for the fuzzer's requests to reach: credentials, and per API the resources its routes
 * act on (a database with collections and records, a file and an upload; subscriptions with leased
 * messages; model routes on fake upstreams, a vector database and collections). Path parameters mix
 * these real ids with generated ones, so a route is exercised beyond "not found".
 */
import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Api } from '../../../lambdas/shared/api.js';
import { Tenants } from '../../../lambdas/auth/tenants.js';
import { OAuthClients } from '../../../lambdas/auth/oauth-clients.js';
import type { TestPlatform } from '../platform.js';
import { ModelRoutes } from '../../../lambdas/ai/model-routes.js';
import { createVectorDatabase } from '../../../lambdas/vector/databases.js';
import { startFakeOpenAi } from '../fake-openai.js';
import { fakeVector, startFakeEmbedder } from '../fake-embedder.js';
import { closeServer, listen } from '../servers.js';
import { settledCollection, uploadFile, type Client } from '../knowledge-calls.js';
import type { Credential, Operation, OperationFixtures } from './requests.js';
import { PublishableKeys } from '../../../lambdas/auth/publishable-keys.js';

export interface ApiFixtures {
  baseUrl: string;
  /** Brings back what earlier operations deleted or changed (before each operation's runs). */
  refresh(): Promise<void>;
  forOperation(operation: Operation): OperationFixtures;
  close?(): Promise<void>;
}

export interface Called {
  status: number;
  body: any;
}

export async function call(baseUrl: string, key: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Called> {
  const raw = body === undefined ? undefined : body instanceof Uint8Array ? body : JSON.stringify(body);
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(raw === undefined ? {} : { 'content-type': body instanceof Uint8Array ? 'application/octet-stream' : 'application/json' }), ...headers },
    body: raw,
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed };
}

async function must(what: string, r: Promise<Called>, ...ok: number[]): Promise<any> {
  const answer = await r;
  if (!(ok.length ? ok : [200, 201]).includes(answer.status)) throw new Error(`fuzz fixture ${what}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
  return answer.body;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** The OAuth token route's real client, for each API (its answers differ from every other route's). */
async function oauthClient(p: TestPlatform, baseUrl: string, capabilities: ('ai.chat' | 'ai.embeddings' | 'knowledge' | 'decision')[] = []) {
  const now = () => p.engine.clock.now();
  const app = await new Tenants(p.engine.kv, now).createApplication(p.credentials.workspace_id, `fuzz-${randomUUID().slice(0, 8)}`, capabilities);
  const client = await new OAuthClients(p.engine.kv, now).create(app.id);
  // Its access token: the oauth_client credential of the requests (bound to the application).
  const res = await fetch(`${baseUrl}/v1/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }) });
  if (res.status !== 200) throw new Error(`fuzz fixture token: ${res.status} ${await res.text()}`);
  const token = ((await res.json()) as { access_token: string }).access_token;
  return { app, client, token };
}

const bearerOf = (kind: string, token: string, extra: Record<string, string> = {}): Credential => ({ kind, headers: { authorization: `Bearer ${token}`, ...extra } });

/** The token request's fields, and (for the token route only) the whole request that gets a token. */
const oauthHints = (client: { client_id: string; client_secret: string }, operationId: string) => ({
  client_id: [client.client_id],
  client_secret: [client.client_secret],
  grant_type: ['client_credentials'],
  ...(operationId === 'oauthToken' ? { '': [{ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }] } : {}),
});

// ---------------------------------------------------------------------------------------------
// Data

const DB = 'fuzzdb';
const RECORD_IDS = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
const FILE = new TextEncoder().encode('the fuzzer\'s file\n');
const UPLOADED = new TextEncoder().encode('a file uploaded in parts\n');

export async function dataFixtures(p: TestPlatform): Promise<ApiFixtures> {
  const url = p.urls.data;
  const orgKey = p.credentials.secret_key;
  const { app, client, token } = await oauthClient(p, url);
  // An application's databases are its own: the things to act on are made with a secret key bound to
  // the application, so its OAuth token, its users' tokens and its publishable key reach them too (and
  // the end-user token route takes only such a key).
  const key = (await new Tenants(p.engine.kv, () => p.engine.clock.now()).createSecretKey(p.credentials.organization_id, app.id)).key;
  const origin = 'https://fuzz.example';
  const publishable = (await new PublishableKeys(p.engine.kv, () => p.engine.clock.now()).create(app.id, [origin])).key;
  const endUser = (await must('end-user token', call(url, key, 'POST', '/v1/end-user-tokens', { user_id: 'fuzz-user' }))).token as string;
  await must('database', call(url, key, 'PUT', `/v1/databases/${DB}`));
  await must('free collection', call(url, key, 'PUT', `/v1/databases/${DB}/collections/things`, { mode: 'free' }));
  const typedFields = [
    { name: 'title', type: 'text', required: true, indexed: true, fulltext: true },
    { name: 'n', type: 'integer', indexed: true },
    { name: 'price', type: 'number', indexed: true },
    { name: 'flag', type: 'bool', indexed: true },
    { name: 'when', type: 'datetime', indexed: true },
    { name: 'meta', type: 'json' },
    { name: 'sku', type: 'text', unique: true },
    { name: 'other', type: 'relation', target: 'things' },
    { name: 'file', type: 'blob' },
  ];
  await must('typed collection', call(url, key, 'PUT', `/v1/databases/${DB}/collections/typed`, { fields: typedFields, rules: { list: 'public', view: 'public', create: 'users', update: null, delete: null } }));
  const fileSha = sha256(FILE);
  const uploadSha = sha256(UPLOADED);
  let uploadId = '';
  let partEtag = '';

  const refresh = async () => {
    // Only what is missing is made again: a refresh runs before every operation.
    for (const [collection, record] of [
      ['things', (id: string) => ({ id, name: `thing ${id}`, n: 1, tags: ['a'] })],
      ['typed', (id: string) => ({ id, title: `title ${id}`, n: 2, price: 1.5, flag: true, when: '2026-01-01T00:00:00.000Z' })],
    ] as const) {
      const listed = await must('records', call(url, key, 'GET', `/v1/databases/${DB}/collections/${collection}/records?limit=100&sort=id`));
      const present = new Set((listed.records as { id: string }[]).map((r) => r.id));
      for (const id of RECORD_IDS.filter((i) => !present.has(i))) await must('record', call(url, key, 'POST', `/v1/databases/${DB}/collections/${collection}/records`, record(id)), 201);
    }
    if ((await call(url, key, 'HEAD', `/v1/databases/${DB}/blobs/${fileSha}`)).status !== 200) await must('file', call(url, key, 'PUT', `/v1/databases/${DB}/blobs/${fileSha}`, FILE), 200, 201);
    // An open multipart upload (a file not stored yet) with its one part sent (again: the part route's
    // runs send other bytes), so its part, complete and abort routes have something to act on.
    const part = () => call(url, key, 'PUT', `/v1/databases/${DB}/blobs/${uploadSha}/uploads/${uploadId}/parts/1`, UPLOADED);
    let sent = uploadId ? await part() : undefined;
    if (sent?.status !== 200) {
      await call(url, key, 'DELETE', `/v1/databases/${DB}/blobs/${uploadSha}`);
      uploadId = (await must('upload', call(url, key, 'POST', `/v1/databases/${DB}/blobs/${uploadSha}/uploads`))).upload_id;
      sent = await part();
    }
    partEtag = (await must('part', Promise.resolve(sent!))).etag;
  };
  await refresh();

  const contexts = () => [
    ...RECORD_IDS.flatMap((id) => [
      { database: DB, collection: 'things', id, sha256: fileSha },
      { database: DB, collection: 'typed', id, sha256: fileSha },
    ]),
    { database: DB, collection: 'things', id: RECORD_IDS[0], sha256: uploadSha, upload_id: uploadId, n: '1' },
  ];
  const bodies = {
    record: [{ name: 'x', n: 3 }, { title: 'fuzzed', n: 5, price: 2.5, flag: false, when: '2026-02-01T00:00:00.000Z', meta: { a: [1] }, other: 'r1' }, { id: 'new-one', title: 'new' }, { __proto__x: 1 }],
  };
  return {
    baseUrl: url,
    refresh,
    forOperation({ op }) {
      const id = op.operationId as string;
      const base: OperationFixtures = {
        contexts: contexts(),
        // The application's key most often; its OAuth token, a user's token and a page's publishable key
        // (from its origin) as the collections' rules allow them (the typed one: anyone lists and views, users create).
        credentials: [
          bearerOf('secret_key', key),
          bearerOf('secret_key', key),
          bearerOf('oauth_client', token),
          bearerOf('end_user', endUser),
          bearerOf('publishable_key', publishable, { origin }),
          // The bootstrap's organization-wide key: the application's databases are not its own.
          bearerOf('secret_key', orgKey),
        ],
        headers: () => ({}),
        hints: {
          ...oauthHints(client, id),
          'ops.*.collection': ['things', 'typed'],
          'ops.*.id': [...RECORD_IDS, 'new-batch'],
          'ops.*.data': bodies.record,
          'ops.*.version': [1, 2],
          'parts.*.part_number': [1],
          'parts.*.etag': [partEtag],
          size: [UPLOADED.length],
          ...(id === 'uploadsComplete' ? { '': [{ parts: [{ part_number: 1, etag: partEtag }], size: UPLOADED.length }] } : {}),
          user_id: ['user-1'],
          '$query.sort': ['id', '-n', 'title', 'created_at', '-updated_at', 'nope'],
          '$query.filter[<field>]': ['1', 'true', 'title r1', '2026-01-01T00:00:00.000Z'],
          '$query.filter[<field>][<op>]': ['1', '1,2', '2026-01-01T00:00:00.000Z', 'x'],
          '$query.limit': ['1', '5', '100'],
          '$query.q': ['title', 'fuzzed'],
          '$query.file_sha256': [fileSha],
          '$header.If-Match': ['"1"', '1', 'W/"2"'],
          '$header.If-None-Match': ['*', '"1"'],
          ...(id === 'recordsCreate' || id === 'recordsUpdate' ? { '': bodies.record } : {}),
          ...(id === 'collectionsPut' ? { '': [{ mode: 'free' }, { fields: typedFields.slice(0, 3) }, { fields: [{ name: 'a', type: 'text' }], rules: { list: 'public', view: '@request.auth.id != ""' } }] } : {}),
        },
        placeholderNames: ['title', 'n', 'price', 'flag', 'when', 'id', 'created_at', 'nope', '__proto__'],
        // The file's bytes (a PUT of them stores it), the upload's part, none, and others.
        rawBodies: [new TextDecoder().decode(FILE), new TextDecoder().decode(UPLOADED), '', 'x'],
      };
      // Collection definitions change on the scratch collections only: the others keep the shape the record routes are fuzzed on.
      if (id === 'collectionsPut') base.contexts = [{ database: DB, collection: 'scratch' }, { database: DB, collection: 'scratch_two' }];
      return base;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Events

export async function eventsFixtures(p: TestPlatform): Promise<ApiFixtures> {
  const url = p.urls.events;
  const key = p.credentials.secret_key;
  const ws = p.credentials.workspace_id;
  const { client, token } = await oauthClient(p, url);
  // Webhook subscriptions deliver to a receiver on loopback (EVENTS_ALLOW_LOOPBACK_WEBHOOKS set by the test).
  const receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200).end('ok'));
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  let subscriptions: string[] = [];
  let leases: string[] = [];
  const event = { type: 'fuzz.made', data: { n: 1 } };

  const refresh = async () => {
    const listed = await must('subscriptions', call(url, key, 'GET', `/v1/workspaces/${ws}/subscriptions`));
    subscriptions = (listed.data ?? listed.subscriptions ?? []).map((s: { subscription_id?: string; id?: string }) => s.subscription_id ?? s.id).filter(Boolean);
    while (subscriptions.length < 4) subscriptions.push((await must('subscription', call(url, key, 'POST', `/v1/workspaces/${ws}/subscriptions`, { types: ['fuzz.*'], delivery: { mode: 'pull' } }), 201)).subscription_id);
    await must('publish', call(url, key, 'POST', `/v1/workspaces/${ws}/events`, { events: [event, event, event] }), 202);
    const pulled = await must('pull', call(url, key, 'POST', `/v1/workspaces/${ws}/subscriptions/${subscriptions[0]}/pull`, { max: 3, lease_seconds: 300 }));
    leases = (pulled.messages ?? []).flatMap((m: { lease_id: string; event_id: string }) => [m.lease_id, m.event_id]);
  };
  await refresh();

  return {
    baseUrl: url,
    refresh,
    forOperation({ op }) {
      return {
        contexts: subscriptions.map((s) => ({ workspace_id: ws, subscription_id: s, event_id: leases[1] ?? 'evt_00000000000000000000000000' })),
        credentials: [bearerOf('secret_key', key), bearerOf('secret_key', key), bearerOf('oauth_client', token)],
        headers: () => ({}),
        hints: {
          ...oauthHints(client, String(op.operationId)),
          'types.*': ['fuzz.*', '*', 'fuzz.made', 'order.paid'],
          delivery: [{ mode: 'pull' }, { mode: 'websocket' }, { mode: 'webhook', url: hook }],
          'delivery.url': [hook, 'https://example.com/hook'],
          event: [event, { type: 'fuzz.other', data: null, idempotency_key: 'k1' }],
          'events.*': [event, { type: 'fuzz.tiered', data: 'x', tier: 'advanced' }],
          'ids.*': leases,
          max: [1, 10, 100],
          lease_seconds: [5, 30, 300],
        },
      };
    },
    close: () =>
      new Promise<void>((resolve) => {
        receiver.closeAllConnections();
        receiver.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// AI

/**
 * The upstreams a generic run and a decision run call: a generic run's answers its input back; a
 * decision tier answers every question of the schema it is sent with its first code (what a model
 * that follows the schema answers), so valid runs reach the end of the decision code.
 */
async function runUpstreams() {
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : {};
      const json = (v: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(v));
      if (req.url === '/run') return json({ output: { got: body }, score: 0.5 });
      const properties = body.response_format?.json_schema?.schema?.properties ?? {};
      const answer = Object.fromEntries(Object.entries<any>(properties).map(([id, prop]) => [id, { answer: prop.properties?.answer?.enum?.[0] ?? 'yes', confidence: 0.9 }]));
      json({ id: 'chatcmpl-tier', object: 'chat.completion', created: 1, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: JSON.stringify(answer) }, finish_reason: 'stop', logprobs: null }], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } });
    });
  });
  return { url: await listen(server), close: () => closeServer(server) };
}

const KNOWN_TEXT = 'The winter ferry leaves at nine. Tickets are sold on board.';

export async function aiFixtures(p: TestPlatform): Promise<ApiFixtures> {
  const url = p.urls.ai;
  const key = p.credentials.secret_key;
  const org = p.credentials.organization_id;
  const client: Client = { url, key };
  const { client: oauth, token } = await oauthClient(p, url, ['ai.chat', 'ai.embeddings', 'knowledge', 'decision']);
  const [chat, embedder, runs] = await Promise.all([startFakeOpenAi(), startFakeEmbedder(), runUpstreams()]);
  const routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
  await routes.set(org, { id: 'chat-main', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: chat.baseUrl, upstream_model: 'gpt-fake', default: true, timeout_ms: 5_000 });
  await routes.set(org, { id: 'embed-main', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'embed-fake', default: true, timeout_ms: 5_000 });
  await routes.set(org, { id: 'tier', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: `${runs.url}/v1`, upstream_model: 'tier-fake', timeout_ms: 5_000 });
  await routes.set(org, { id: 'run', endpoint: '/v1/run', provider: 'http', base_url: `${runs.url}/run`, default: true, timeout_ms: 5_000 });
  await routes.set(org, { id: 'judge', endpoint: '/v1/run', provider: 'decision', tiers: ['tier'] });
  await createVectorDatabase(p.engine, p.credentials.workspace_id, 'embed-main');

  const opId = () => ({ 'x-operation-id': `op-${randomUUID()}` });
  await must('ingest', call(url, key, 'POST', '/v1/vector/ingest', { scope: 'shared', documents: [{ id: 'p1', text: KNOWN_TEXT, document_id: 'doc-1', metadata: { kind: 'doc', tag: ['a'] } }] }, opId()));
  await must('ingest local', call(url, key, 'POST', '/v1/vector/ingest', { scope: 'local', documents: [{ id: 'p2', text: KNOWN_TEXT, document_id: 'doc-2' }] }, opId()));

  const bytes = new TextEncoder().encode(`${KNOWN_TEXT}\n`);
  const doneUpload = await uploadFile(client, bytes, 'ferry.txt', 'text/plain');
  const openBytes = new TextEncoder().encode('an upload left open\n');
  let openUpload = '';
  const collections: Record<'cloud' | 'download' | 'local_vectors', string> = { cloud: '', download: '', local_vectors: '' };
  const items: Record<string, string[]> = {};
  const chunks: string[] = [];

  const refresh = async () => {
    // An upload still open, for its part and complete routes.
    const open = openUpload ? await call(url, key, 'GET', `/v1/uploads/${openUpload}`) : undefined;
    if (!open || open.status !== 200 || open.body.status !== 'pending') {
      openUpload = (await must('upload', call(url, key, 'POST', '/v1/uploads', { filename: 'open.txt', content_type: 'text/plain', size: openBytes.length, sha256: sha256(openBytes) }, opId()))).id;
    }
    let made = false;
    for (const mode of ['cloud', 'download', 'local_vectors'] as const) {
      const got = collections[mode] ? await call(url, key, 'GET', `/v1/collections/${collections[mode]}`) : undefined;
      if (got?.status === 200) continue;
      collections[mode] = (await must('collection', call(url, key, 'POST', '/v1/collections', { mode, name: `fuzz ${mode}` }, opId()), 201)).id;
      items[collections[mode]] = [];
      made = true;
    }
    for (const id of Object.values(collections)) {
      const listed = await must('items', call(url, key, 'GET', `/v1/collections/${id}/items?limit=100`));
      const present = new Set((listed.data ?? []).map((i: { item_id: string }) => i.item_id));
      items[id] = (items[id] ?? []).filter((i) => present.has(i));
      if (items[id].length < 2) {
        for (const body of [{ text: KNOWN_TEXT, filename: 'ferry.md' }, { upload_id: doneUpload }]) {
          const added = await must('item', call(url, key, 'POST', `/v1/collections/${id}/items`, body, opId()), 202);
          items[id].push(added.item_id);
        }
        made = true;
      }
    }
    if (made) {
      for (const id of Object.values(collections)) {
        await settledCollection(client, id, 60_000).catch(async (error) => {
          throw new Error(`${(error as Error).message}: ${JSON.stringify((await call(url, key, 'GET', `/v1/collections/${id}/items`)).body).slice(0, 1500)}`);
        });
      }
      const local = collections.local_vectors;
      chunks.length = 0;
      for (const item of items[local]) {
        const listed = await call(url, key, 'GET', `/v1/collections/${local}/items/${item}/chunks?limit=5`);
        for (const c of (listed.body?.data ?? []) as { chunk_id: string }[]) chunks.push(c.chunk_id);
      }
    }
  };
  await refresh();

  return {
    baseUrl: url,
    refresh,
    forOperation({ op, template }) {
      const id = String(op.operationId);
      const uploads = template.startsWith('/v1/uploads');
      const contexts = uploads
        ? [{ id: openUpload, n: '1' }, { id: doneUpload, n: '1' }]
        : Object.values(collections).flatMap((c) => (items[c] ?? []).map((item) => ({ id: c, item_id: item, document_id: 'doc-1' })));
      const models: Record<string, string[]> = { chatCompletions: ['chat-main', 'auto'], embeddings: ['embed-main', 'auto'], run: ['run', 'judge', 'auto'] };
      return {
        contexts: contexts.length ? contexts : [{ document_id: 'doc-1' }],
        credentials: [bearerOf('secret_key', key), bearerOf('secret_key', key), bearerOf('oauth_client', token)],
        // A fresh operation id each request (a repeated one replays an answer, or is a conflict).
        headers: () => opId(),
        hints: {
          ...oauthHints(oauth, id),
          model: models[id] ?? [],
          'messages.*.content': ['Hi', 'What time is the ferry?'],
          'documents.*.text': [KNOWN_TEXT],
          'documents.*.document_id': ['doc-1', 'doc-3'],
          query: ['ferry', KNOWN_TEXT],
          vector: [[0.1, 0.2, 0.3], fakeVector(KNOWN_TEXT)],
          'vectors.*.chunk_id': chunks.length ? chunks : ['chk_000000'],
          'vectors.*.vector': [[0.1, 0.2, 0.3], fakeVector(KNOWN_TEXT)],
          ...(id === 'collectionsItemsCreate' ? { '': [{ text: KNOWN_TEXT, filename: 'a.md' }, { upload_id: doneUpload }, { text: 'x', filename: 'b.html', content_type: 'text/html' }] } : {}),
          ...(id === 'uploadsCreate' ? { sha256: [sha256(bytes)], size: [bytes.length] } : {}),
        },
        rawBodies: [new TextDecoder().decode(openBytes), '', 'x'],
      };
    },
    close: async () => {
      await Promise.all([chat.close(), embedder.close(), runs.close()]);
    },
  };
}

export const FIXTURES: Partial<Record<Api, (p: TestPlatform) => Promise<ApiFixtures>>> = { ai: aiFixtures, data: dataFixtures, events: eventsFixtures };
