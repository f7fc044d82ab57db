/**
 * Operation ids an organization made optional (`org settings --operation-ids optional`;
 * docs/decisions/operation-ids-optional.md): the official `openai` client, unchanged, against the
 * local platform and a fake upstream. In such an organization a write without X-Operation-Id runs
 * under an id made up for it (echoed, never replayed) or under the SDKs' Idempotency-Key; an
 * organization left at the default keeps spec 4.1's 400 missing_operation_id.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { admin, adminOk } from '../helpers/cli.js';
import { postBytes } from '../helpers/ai-calls.js';
import { waitFor } from '../helpers/wait.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { AiOrgSettings } from '../../lambdas/ai/org-settings.js';

let p: TestPlatform;
let fake: FakeOpenAi;
/** An organization whose operation ids are optional, and its key. */
let optionalOrg: string;
let optionalKey: string;
/** The client of that organization, and of the bootstrapped one (left at the default). */
let sdk: OpenAI;
let defaultSdk: OpenAI;
let n = 0;
const freshId = () => `idem-key-test-${++n}-${Date.now()}`;
const hi = [{ role: 'user' as const, content: 'Hi' }];

async function setRoutes(org: string) {
  const routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
  await routes.set(org, { id: 'chat-main', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: fake.baseUrl, upstream_model: 'gpt-fake', default: true });
  await routes.set(org, { id: 'embed-main', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: fake.baseUrl, upstream_model: 'embed-fake', default: true });
}

const clientFor = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${p.urls.ai}/v1`, maxRetries: 0 });

beforeAll(async () => {
  p = await startTestPlatform();
  fake = await startFakeOpenAi();
  // As an administrator does it: an organization, a key, then the setting.
  optionalOrg = adminOk(p.dataDir, 'org', 'create', '--name', 'sdk-users').id;
  optionalKey = adminOk(p.dataDir, 'key', 'create', '--org', optionalOrg).key;
  expect(adminOk(p.dataDir, 'org', 'settings', '--org', optionalOrg, '--operation-ids', 'optional')).toMatchObject({ organization_id: optionalOrg, operation_ids: 'optional' });
  await setRoutes(optionalOrg);
  await setRoutes(p.credentials.organization_id);
  sdk = clientFor(optionalKey);
  defaultSdk = clientFor(p.credentials.secret_key);
});

afterAll(async () => {
  await fake?.close();
  await p?.close();
});

beforeEach(() => {
  fake.requests.length = 0;
  fake.behavior = { status: 200, chunks: ['Hel', 'lo', '!'], chunkDelayMs: 0, stallMs: 0 };
});

describe('an organization with optional operation ids: the openai client with no extra header', () => {
  it('chats: 200, an id made up and echoed; two identical calls are two upstream calls under two ids', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const { data, response } = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }).withResponse();
      expect(data.choices[0].message.content).toBe('Hello!');
      expect(response.headers.get('x-idempotent-replay')).toBeNull();
      ids.push(response.headers.get('x-operation-id')!);
    }
    expect(ids[0]).toMatch(/^op_[0-9a-f]{32}$/);
    expect(ids[1]).toMatch(/^op_[0-9a-f]{32}$/);
    expect(ids[0]).not.toBe(ids[1]);
    expect(fake.requests).toHaveLength(2);
  });

  it('streams: the chunks, the made-up id echoed', async () => {
    const { data: stream, response } = await sdk.chat.completions.create({ model: 'chat-main', messages: hi, stream: true }).withResponse();
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toBe('Hello!');
    expect(response.headers.get('x-operation-id')).toMatch(/^op_[0-9a-f]{32}$/);
    // Nothing held the id: the same call at once streams again.
    let again = '';
    for await (const chunk of await sdk.chat.completions.create({ model: 'chat-main', messages: hi, stream: true })) again += chunk.choices[0]?.delta?.content ?? '';
    expect(again).toBe('Hello!');
    expect(fake.requests).toHaveLength(2);
  });

  it('embeds: 200, the id echoed; two identical calls are two upstream calls', async () => {
    for (let i = 0; i < 2; i++) {
      const { data, response } = await sdk.embeddings.create({ model: 'embed-main', input: ['a', 'bbb'] }).withResponse();
      expect(data.data).toHaveLength(2);
      expect(response.headers.get('x-operation-id')).toMatch(/^op_[0-9a-f]{32}$/);
    }
    expect(fake.requests).toHaveLength(2);
  });

  it('never replays a made-up id: sent back as X-Operation-Id, it names no earlier call', async () => {
    const first = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }).withResponse();
    const made = first.response.headers.get('x-operation-id')!;
    const second = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }, { headers: { 'X-Operation-Id': made } }).withResponse();
    expect(second.response.headers.get('x-idempotent-replay')).toBeNull();
    expect(second.response.headers.get('x-operation-id')).toBe(made);
    expect(fake.requests).toHaveLength(2);
  });
});

describe('Idempotency-Key, the SDKs\' own header, in an organization with optional operation ids', () => {
  it('is the operation id: echoed, and a repeat replays the kept answer without calling upstream', async () => {
    const key = freshId();
    const first = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }, { headers: { 'Idempotency-Key': key } }).withResponse();
    const again = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }, { headers: { 'Idempotency-Key': key } }).withResponse();
    expect(first.response.headers.get('x-operation-id')).toBe(key);
    expect(again.response.headers.get('x-operation-id')).toBe(key);
    expect(again.response.headers.get('x-idempotent-replay')).toBe('true');
    expect(again.data).toEqual(first.data);
    expect(fake.requests).toHaveLength(1);
    // The same id as X-Operation-Id: one id, whichever header carried it.
    const asOperationId = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }, { headers: { 'X-Operation-Id': key } }).withResponse();
    expect(asOperationId.response.headers.get('x-idempotent-replay')).toBe('true');
  });

  it('is the operation id the activity record keeps', async () => {
    const key = freshId();
    const from = Date.now() - 1000;
    await sdk.chat.completions.create({ model: 'chat-main', messages: hi }, { headers: { 'Idempotency-Key': key } });
    let items: any[] = [];
    await waitFor('the activity record', async () => {
      const res = await fetch(`${p.urls.data}/v1/activity?from=${from}`, { headers: { authorization: `Bearer ${optionalKey}` } });
      items = ((await res.json()) as any).items ?? [];
      return items.some((i) => i.operation_id === key);
    }, 5000);
    expect(items.find((i) => i.operation_id === key)).toMatchObject({ method: 'POST', route: '/v1/chat/completions', status: 200 });
  });

  it('embeddings too', async () => {
    const key = freshId();
    await sdk.embeddings.create({ model: 'embed-main', input: 'a' }, { headers: { 'Idempotency-Key': key } });
    const again = await sdk.embeddings.create({ model: 'embed-main', input: 'a' }, { headers: { 'Idempotency-Key': key } }).withResponse();
    expect(again.response.headers.get('x-idempotent-replay')).toBe('true');
    expect(fake.requests).toHaveLength(1);
  });

  it('X-Operation-Id wins when both are sent', async () => {
    const operationId = freshId();
    const key = freshId();
    const { response } = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }, { headers: { 'X-Operation-Id': operationId, 'Idempotency-Key': key } }).withResponse();
    expect(response.headers.get('x-operation-id')).toBe(operationId);
    // The key was not claimed: a call under it alone runs.
    const byKey = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }, { headers: { 'Idempotency-Key': key } }).withResponse();
    expect(byKey.response.headers.get('x-idempotent-replay')).toBeNull();
    expect(fake.requests).toHaveLength(2);
  });

  it('is checked as X-Operation-Id is: a malformed one is 400 invalid_operation_id, nothing sent upstream', async () => {
    for (const bad of ['short', 'has spaces in it', 'x'.repeat(129)]) {
      const error = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }, { headers: { 'Idempotency-Key': bad } }).catch((e) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error.code).toBe('invalid_operation_id');
      // The header taken as the operation id is the param (the OpenAPI fuzzer found it null).
      expect(error.param).toBe('idempotency-key');
    }
    expect(fake.requests).toHaveLength(0);
  });
});

describe('an organization left at the default (spec 4.1)', () => {
  it('the openai client with no extra header: 400 missing_operation_id on chat, stream and embeddings, nothing sent upstream', async () => {
    const calls = [
      () => defaultSdk.chat.completions.create({ model: 'chat-main', messages: hi }),
      () => defaultSdk.chat.completions.create({ model: 'chat-main', messages: hi, stream: true }),
      () => defaultSdk.embeddings.create({ model: 'embed-main', input: 'a' }),
    ];
    for (const call of calls) {
      const error = await call().catch((e) => e);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect([error.status, error.code]).toEqual([400, 'missing_operation_id']);
      expect(error.headers.get('x-operation-id')).toMatch(/^op_/);
    }
    expect(fake.requests).toHaveLength(0);
  });

  it('an Idempotency-Key does not stand in for X-Operation-Id there', async () => {
    const error = await defaultSdk.chat.completions.create({ model: 'chat-main', messages: hi }, { headers: { 'Idempotency-Key': freshId() } }).catch((e) => e);
    expect([error.status, error.code]).toEqual([400, 'missing_operation_id']);
  });

  it('401 still comes first: no credential, no id, is missing_credentials', async () => {
    const r = await postBytes(`${p.urls.ai}/v1/chat/completions`, JSON.stringify({ messages: hi }), { 'content-type': 'application/json' });
    expect([r.status, r.body.error.code]).toEqual([401, 'missing_credentials']);
  });
});

describe('org settings in the admin CLI', () => {
  it('shows the settings (required by default), sets and resets the mode, refuses another value', () => {
    const org = adminOk(p.dataDir, 'org', 'create', '--name', 'cli-settings').id;
    expect(adminOk(p.dataDir, 'org', 'settings', '--org', org)).toMatchObject({ organization_id: org, operation_ids: 'required', granted_fields: [] });
    expect(adminOk(p.dataDir, 'org', 'settings', '--org', org, '--operation-ids', 'optional').operation_ids).toBe('optional');
    // Other settings survive the change, and the change survives the others.
    expect(adminOk(p.dataDir, 'org', 'grant-field', '--org', org, '--field', 'n')).toMatchObject({ granted_fields: ['n'], operation_ids: 'optional' });
    expect(adminOk(p.dataDir, 'org', 'settings', '--org', org, '--operation-ids', 'required')).toMatchObject({ granted_fields: ['n'], operation_ids: 'required' });
    const bad = admin(p.dataDir, 'org', 'settings', '--org', org, '--operation-ids', 'sometimes');
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain('required, optional');
    expect(bad.stderr).not.toMatch(/\n\s+at /);
    expect(admin(p.dataDir, 'org', 'settings', '--org', 'org_nope', '--operation-ids', 'optional').status).not.toBe(0);
  });

  it("the 400's message names the opt-in for clients that cannot send the header: the command, with the caller's organization, runs as written and lifts the 400", async () => {
    const org = adminOk(p.dataDir, 'org', 'create', '--name', 'told-how').id;
    const client = clientFor(adminOk(p.dataDir, 'key', 'create', '--org', org).key);
    await setRoutes(org);
    const error = await client.chat.completions.create({ model: 'chat-main', messages: hi }).catch((e) => e);
    expect([error.status, error.code]).toEqual([400, 'missing_operation_id']);
    const command = /`npm run --silent admin -- ([^`]+)`/.exec(error.message)?.[1];
    expect(command, error.message).toBe(`org settings --org ${org} --operation-ids optional`);
    expect(adminOk(p.dataDir, ...command!.split(' ')).operation_ids).toBe('optional');
    // The setting is read through the AI settings' cache: a running server applies it within it.
    await waitFor('the setting applied', () => client.chat.completions.create({ model: 'chat-main', messages: hi }).then(() => true, () => false), 10_000, 100);
  });

  it('a running server applies a change (once the settings cache lets go): back to required, the SDK call is 400 again', async () => {
    const settings = new AiOrgSettings(p.engine.kv, () => p.engine.clock.now());
    await settings.setOperationIds(optionalOrg, 'required');
    try {
      const error = await sdk.chat.completions.create({ model: 'chat-main', messages: hi }).catch((e) => e);
      expect([error.status, error.code]).toEqual([400, 'missing_operation_id']);
    } finally {
      await settings.setOperationIds(optionalOrg, 'optional');
    }
  });
});
