/**
 * The admin CLI's vector database commands through the real CLI (docs/ai/vector.md): `vector-db
 * create|delete|show`, `workspace default`, `org features`, and `route set --force` on a stamped
 * route, with what each refuses (exit 1 with a message saying what to do, 2 for usage). `vector-db
 * create` embeds once, so the fake upstream answers from this process while the CLI runs beside it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admin, adminAsync, adminAsyncOk, adminOk, adminOn } from '../helpers/cli.js';
import { FAKE_DIMENSIONS, startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { readDatabase, stampedRoute } from '../../lambdas/vector/databases.js';
import { ingestPassages } from '../../lambdas/vector/ingest.js';
import { parseIngestRequest } from '../../lambdas/vector/passages.js';
import { FEATURES } from '../../lambdas/ai/org-settings.js';

let dir: string;
let org: string;
let ws: string;
let embedder: FakeEmbedder;
const error = (r: { stderr: string }) => JSON.parse(r.stderr).error as string;
const routeSet = (...args: string[]) => ['route', 'set', '--org', org, '--id', 'emb', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', embedder.baseUrl, ...args];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vector-admin-'));
  embedder = await startFakeEmbedder();
  org = adminOk(dir, 'org', 'create', '--name', 'Acme').id;
  ws = adminOk(dir, 'workspace', 'create', '--org', org, '--name', 'main').id;
  adminOk(dir, ...routeSet('--model', 'fake-embed'));
  adminOk(dir, 'route', 'set', '--org', org, '--id', 'chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', embedder.baseUrl, '--model', 'm');
});
afterAll(async () => {
  await embedder?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('admin CLI: vector databases', () => {
  it('creates a database stamped with the route, its upstream model and the dimensions one embeddings call showed; shows its counts', async () => {
    const calls = embedder.calls.length;
    const created = await adminAsyncOk(dir, 'vector-db', 'create', '--workspace', ws, '--embedding-route', 'emb');
    expect(created).toEqual({
      workspace_id: ws,
      organization_id: org,
      database_id: expect.stringMatching(/^vdb_/),
      state: 'active',
      embedding_route: 'emb',
      upstream_model: 'fake-embed',
      dimensions: FAKE_DIMENSIONS,
      index: expect.stringMatching(/^vdb-/),
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      passages: 0,
      bytes: 0,
    });
    expect(embedder.calls.length).toBe(calls + 1);
    const { index: _index, ...shown } = created;
    expect(adminOk(dir, 'vector-db', 'show', '--workspace', ws)).toEqual(shown);

    // Passages stored (here through the domain, on the same data dir) are counted with their bytes.
    const engine = createEmbeddedEngine({ dataDir: dir });
    try {
      const principal: Principal = { kind: 'secret_key', credentialId: 'key_cli', organizationId: org, applicationId: null, workspaceId: null, capabilities: null, userId: null, claims: null, origins: null, permissions: null };
      const database = (await readDatabase(engine, ws))!;
      const request = parseIngestRequest({ scope: 'shared', documents: [{ id: 'a', text: 'first passage' }, { id: 'b', text: 'second', document_id: 'd', metadata: { kind: 'note' } }] });
      expect(await ingestPassages(engine, principal, database, await stampedRoute(engine, database), request)).toEqual({ ingested: 2, skipped: [] });
      expect(adminOk(dir, 'vector-db', 'show', '--workspace', ws)).toMatchObject({ passages: 2, bytes: request.passages.reduce((n, p) => n + p.bytes, 0) });
    } finally {
      await engine.close();
    }
  });

  it('refuses a second database, an unknown workspace, a route that is not an embeddings route, and an upstream that fails', async () => {
    const twice = await adminAsync(dir, 'vector-db', 'create', '--workspace', ws, '--embedding-route', 'emb');
    expect([twice.status, twice.stdout]).toEqual([1, '']);
    expect(error(twice)).toBe(`workspace ${ws} already has a vector database (route emb); delete it first to change its route`);

    const unknown = await adminAsync(dir, 'vector-db', 'create', '--workspace', 'ws_nope', '--embedding-route', 'emb');
    expect([unknown.status, error(unknown)]).toEqual([1, 'no workspace ws_nope']);

    const other = adminOk(dir, 'workspace', 'create', '--org', org, '--name', 'other').id;
    const chat = await adminAsync(dir, 'vector-db', 'create', '--workspace', other, '--embedding-route', 'chat');
    expect([chat.status, error(chat)]).toEqual([1, `no embeddings route chat in organization ${org} (\`route list\` shows them)`]);
    const missing = await adminAsync(dir, 'vector-db', 'create', '--workspace', other, '--embedding-route', 'nothing');
    expect([missing.status, error(missing)]).toEqual([1, `no embeddings route nothing in organization ${org} (\`route list\` shows them)`]);

    embedder.behavior.status = 500;
    try {
      const failing = await adminAsync(dir, 'vector-db', 'create', '--workspace', other, '--embedding-route', 'emb');
      expect(failing.status).toBe(1);
      expect(error(failing)).toMatch(/^route emb did not answer an embeddings call: /);
    } finally {
      embedder.behavior.status = 200;
    }
    expect(adminOk(dir, 'vector-db', 'show', '--workspace', other)).toEqual({ workspace_id: other, state: 'none' });

    expect(admin(dir, 'vector-db', 'create', '--workspace', other).status).toBe(2); // --embedding-route missing
    expect(admin(dir, 'vector-db', 'show').status).toBe(2);
  });

  it('keeps a stamped route on its upstream model unless forced, naming the workspace', async () => {
    const changed = admin(dir, ...routeSet('--model', 'another-model'));
    expect([changed.status, changed.stdout]).toEqual([1, '']);
    expect(error(changed)).toMatch(new RegExp(`^route emb embeds for the vector database of workspace ${ws}: .*--force`));
    const moved = admin(dir, 'route', 'set', '--org', org, '--id', 'emb', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'fake-embed');
    expect(error(moved)).toMatch(new RegExp(`workspace ${ws}`));
    expect(adminOk(dir, 'route', 'list', '--org', org).data.find((r: { id: string }) => r.id === 'emb')).toMatchObject({ upstream_model: 'fake-embed', base_url: embedder.baseUrl });
    // What does not change the upstream needs no force.
    expect(adminOk(dir, ...routeSet('--model', 'fake-embed', '--timeout-ms', '5000'))).toMatchObject({ upstream_model: 'fake-embed', timeout_ms: 5000 });
    expect(adminOk(dir, ...routeSet('--model', 'another-model', '--force'))).toMatchObject({ upstream_model: 'another-model' });
    expect(adminOk(dir, ...routeSet('--model', 'fake-embed', '--force'))).toMatchObject({ upstream_model: 'fake-embed' });
  });

  it('deletes a database (deleting at once), refuses to create it again meanwhile, and refuses a workspace without one', async () => {
    const deleted = adminOk(dir, 'vector-db', 'delete', '--workspace', ws);
    expect(deleted).toMatchObject({ workspace_id: ws, state: 'deleting', embedding_route: 'emb' });
    expect(adminOk(dir, 'vector-db', 'show', '--workspace', ws)).toMatchObject({ state: 'deleting', passages: 2 });
    // Deleting again sends the removal job again (a lost job starts over).
    expect(adminOk(dir, 'vector-db', 'delete', '--workspace', ws)).toMatchObject({ state: 'deleting' });
    const meanwhile = await adminAsync(dir, 'vector-db', 'create', '--workspace', ws, '--embedding-route', 'emb');
    expect([meanwhile.status, error(meanwhile)]).toEqual([1, `the vector database of workspace ${ws} is still being deleted; try again when \`vector-db show\` says it is gone`]);

    const other = adminOk(dir, 'workspace', 'create', '--org', org, '--name', 'empty').id;
    const none = admin(dir, 'vector-db', 'delete', '--workspace', other);
    expect([none.status, none.stdout, error(none)]).toEqual([1, '', `workspace ${other} has no vector database`]);
    expect(admin(dir, 'vector-db', 'delete').status).toBe(2);
  });
});

describe('admin CLI: vector databases on AWS', () => {
  it('refuses `vector-db create` without VECTOR_BUCKET_NAME before any call, naming the output that holds it', async () => {
    // Nothing answers at the endpoint: the refusal must come before DynamoDB, the embeddings call (charged) and S3 Vectors.
    const env = { ENGINE: 'aws', TABLE_NAME: 'PlatformTable', AWS_ENDPOINT_URL: 'http://127.0.0.1:9', AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' };
    const r = await adminOn(env, 'vector-db', 'create', '--workspace', 'ws_1', '--embedding-route', 'embed');
    expect(r.status, r.stderr).toBe(1);
    expect(error(r)).toBe("ENGINE=aws: VECTOR_BUCKET_NAME must be set for vector-db create (the stack's VectorBucketName output; docs/deploying.md, section 5)");
  });
});

describe('admin CLI: the default workspace and feature switches', () => {
  it("sets the organization's default workspace, only to one of its own", () => {
    const second = adminOk(dir, 'workspace', 'create', '--org', org, '--name', 'second').id;
    expect(adminOk(dir, 'workspace', 'default', '--org', org, '--workspace', second)).toEqual({ organization_id: org, workspace_id: second });
    expect(adminOk(dir, 'workspace', 'default', '--org', org, '--workspace', ws)).toEqual({ organization_id: org, workspace_id: ws });
    const stranger = adminOk(dir, 'org', 'create', '--name', 'Other').id;
    const theirs = adminOk(dir, 'workspace', 'create', '--org', stranger, '--name', 'theirs').id;
    const foreign = admin(dir, 'workspace', 'default', '--org', org, '--workspace', theirs);
    expect([foreign.status, foreign.stdout, error(foreign)]).toEqual([1, '', `no workspace ${theirs} in organization ${org}`]);
    expect(error(admin(dir, 'workspace', 'default', '--org', org, '--workspace', 'ws_nope'))).toBe(`no workspace ws_nope in organization ${org}`);
    expect(admin(dir, 'workspace', 'default', '--org', org).status).toBe(2);
  });

  it('disables and enables features, shows them without an option, and refuses an unknown one listing the features', () => {
    expect(adminOk(dir, 'org', 'features', '--org', org)).toMatchObject({ organization_id: org, disabled_features: [] });
    expect(adminOk(dir, 'org', 'features', '--org', org, '--disable', 'vector')).toMatchObject({ disabled_features: ['vector'] });
    expect(adminOk(dir, 'org', 'features', '--org', org, '--disable', 'collections,vector')).toMatchObject({ disabled_features: ['vector', 'collections'] });
    expect(adminOk(dir, 'org', 'features', '--org', org)).toMatchObject({ disabled_features: ['vector', 'collections'] });
    expect(adminOk(dir, 'org', 'features', '--org', org, '--enable', 'vector,collections')).toMatchObject({ disabled_features: [] });

    const unknown = admin(dir, 'org', 'features', '--org', org, '--disable', 'vector,search');
    expect([unknown.status, unknown.stdout]).toEqual([1, '']);
    expect(error(unknown)).toBe(`unknown features: search (features: ${FEATURES.join(', ')})`);
    expect(adminOk(dir, 'org', 'features', '--org', org).disabled_features).toEqual([]);
    expect(error(admin(dir, 'org', 'features', '--org', 'org_nope', '--disable', 'vector'))).toBe('no organization org_nope');
    expect(admin(dir, 'org', 'features', '--disable', 'vector').status).toBe(2);
  });
});
