/**
 * Every function of the stack, loaded and called as Lambda does (docs/decisions/lambda-bundles.md):
 * its entry bundled with the stack's own settings, the bundle alone in an empty folder, a fresh `node`
 * with the template's environment for that function. It must load, export `handler`, and answer a
 * representative event with the route's (or consumer's) own answer, not an init or import error.
 * Every route is also called with a key seeded in the table (an organization, a workspace, a secret
 * key; an application with an OAuth client and a publishable key): it must give its own answer (a list,
 * a 404 for an id the table does not hold, its validation's 400), never 401, 403 or 5xx.
 * AWS is stood in for on the wire (startAwsStandIn): each call is authorized against the calling
 * function's role in the template, as IAM would (a call it has no grant for is refused and fails the
 * test); DynamoDB is a real dynalite, Secrets Manager and KMS answer for the stack's secret and signing
 * key, anything else is refused and recorded, so each function's calls are checked too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { CreateTableCommand, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { GetPublicKeyCommand, KMSClient, SignCommand } from '@aws-sdk/client-kms';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { CONSOLE_ORIGIN_HEADER } from '../../lambdas/shared/console-headers.js';
import { ROUTES, SOCKET_ROUTES, STREAM_PATH_HEADER, type RouteDef } from '../../lambdas/http/routes.js';
import { TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import { CAPABILITIES, Tenants } from '../../lambdas/auth/tenants.js';
import { OAuthClients } from '../../lambdas/auth/oauth-clients.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { PROJECT_ROOT } from '../../lib/function-defaults.js';
import { buildBundles, runAlone, stackFunctions, startAwsStandIn, type AllowStatement, type AwsCall, type Bundle, type StackFunction } from '../helpers/lambda-bundles.js';
import { startDynalite, type DynaliteTable } from '../helpers/dynalite.js';

const { functions, tables, secrets } = stackFunctions();
const UNKNOWN_KEY = `aik_${'ab'.repeat(32)}`;
const BUILTINS = new Set(builtinModules);
const keyOf = (f: StackFunction) => `${f.kind}:${f.name}`;
// Letters and digits only: SigV4 splits its Credential on "/", which a nested stack's function id holds.
const accessKeyOf = (f: StackFunction) => `AKIA${f.logicalId.replace(/[^A-Za-z0-9]/g, '')}`;
/**
 * Bundling every function took over 120 s on a loaded machine (other suites, other runs): a margin,
 * not a target. On an unchanged tree the bundles come from the cache (buildBundles).
 */
const TIMEOUT_MS = 600_000;

/** What the table holds for the authenticated calls (seeded as the AWS engine's tests seed tenants). */
interface Seeded {
  org: string;
  workspace: string;
  key: string;
  /** A secret key bound to the application (what end-user tokens need). */
  appKey: string;
  client: { id: string; secret: string };
  origin: string;
}
let seeded: Seeded;
/** Access key id -> the role's statements: each function's (accessKeyOf), and the stand-in's own test's. */
const principals = new Map(functions.map((f) => [accessKeyOf(f), f.allowed as readonly AllowStatement[]]));

let outdir: string;
let bundles: Map<string, Bundle>;
let dynalite: DynaliteTable;
let aws: Awaited<ReturnType<typeof startAwsStandIn>>;

beforeAll(async () => {
  outdir = mkdtempSync(join(tmpdir(), 'lambda-bundles-'));
  // Every entry at once (one esbuild run per set of defines, the runs in parallel), from the cache when
  // nothing they read changed; without source maps, which a bundle loaded alone never reads.
  const building = buildBundles(functions.map((f) => ({ key: keyOf(f), entry: f.entry, define: f.define })), outdir, { sourcemap: false });
  const [main, ...others] = tables;
  // The template's tables under their placeholder names (their logical ids): the platform table with
  // its indexes (as the AWS adapter's tests make it), the others with their own keys.
  dynalite = await startDynalite(tables.find((t) => t.partitionKey === TABLE_SCHEMA.partitionKey)?.logicalId ?? main.logicalId);
  for (const t of others.filter((t) => t.logicalId !== dynalite.tableName)) await createPlainTable(dynalite.client, t);
  aws = await startAwsStandIn(dynalite, { principals, tables, secrets });
  // After the stand-in: it emulates dynalite's missing transactions, which the seeding writes with too.
  seeded = await seed(new DynamoKeyValueStore(dynalite.client, dynalite.tableName, systemClock));
  bundles = await building;
}, TIMEOUT_MS);

/** An organization with a workspace and a secret key; an application with every capability, an OAuth client and a publishable key for one origin. */
async function seed(kv: DynamoKeyValueStore): Promise<Seeded> {
  const now = () => Date.now();
  const tenants = new Tenants(kv, now);
  const org = (await tenants.createOrganization('bundles')).id;
  const workspace = (await tenants.createWorkspace(org, 'main')).id;
  const key = (await tenants.createSecretKey(org)).key;
  const app = await tenants.createApplication(workspace, 'bundles', [...CAPABILITIES]);
  const appKey = (await tenants.createSecretKey(org, app.id)).key;
  const client = await new OAuthClients(kv, now).create(app.id);
  const origin = 'https://app.example';
  await new PublishableKeys(kv, now).create(app.id, [origin]);
  return { org, workspace, key, appKey, client: { id: client.client_id, secret: client.client_secret }, origin };
}

afterAll(async () => {
  await aws?.close();
  await dynalite?.close();
  if (outdir) rmSync(outdir, { recursive: true, force: true });
});

async function createPlainTable(client: DynamoDBClient, t: { logicalId: string; partitionKey: string; sortKey?: string }) {
  const keys = [t.partitionKey, ...(t.sortKey ? [t.sortKey] : [])];
  await client.send(
    new CreateTableCommand({
      TableName: t.logicalId,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: keys.map((AttributeName) => ({ AttributeName, AttributeType: 'S' })),
      KeySchema: keys.map((AttributeName, i) => ({ AttributeName, KeyType: i === 0 ? 'HASH' : 'RANGE' })),
    }),
  );
}

/** Every module under lambdas/ that exports `handler`, relative to the project. */
function handlerModules(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && /^export (const|async function|function) handler\b/m.test(readFileSync(path, 'utf8'))) found.push(relative(PROJECT_ROOT, path));
    }
  };
  walk(join(PROJECT_ROOT, 'lambdas'));
  return found.sort();
}


/** A route's parameters: sample values (ids the table does not hold), the workspace's when one is given, and a case's own. */
function sampleParameters(route: RouteDef, workspace?: string): Record<string, string> {
  const names = [...route.path.matchAll(/\{([^}+]+)\+?\}/g)].map((m) => m[1]);
  const own = (workspace && AUTHENTICATED[route.id]?.params) || {};
  return Object.fromEntries(names.map((name) => [name, own[name] ?? (name === 'proxy' ? 'v1/databases' : name === 'workspace_id' && workspace ? workspace : `sample_${name}`.slice(0, 20))]));
}

/** A route's path with its parameters filled in (sampleParameters). */
const samplePath = (route: RouteDef, workspace?: string) => {
  if (route.path === '$default') return '/v1/no-such-path';
  const values = sampleParameters(route, workspace);
  return route.path.replace(/\{([^}+]+)\+?\}/g, (_, name: string) => values[name]);
};

/** What API Gateway adds for a matched route: its route key and path parameters (the handlers read them there). */
function routed(route: RouteDef, event: ReturnType<typeof httpEvent>, workspace?: string) {
  if (route.path === '$default') return event;
  const parameters = sampleParameters(route, workspace);
  return { ...event, routeKey: `${route.method === 'ANY' ? 'ANY' : route.method} ${route.path}`, ...(Object.keys(parameters).length ? { pathParameters: parameters } : {}) };
}

/** An HTTP API (payload 2.0) event, as API Gateway or a function URL sends it. */
function httpEvent(method: string, path: string, headers: Record<string, string> = {}, body?: string) {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: { host: 'api.example.com', 'user-agent': 'lambda-bundles-test', ...headers },
    requestContext: {
      accountId: '000000000000',
      apiId: 'placeholder',
      domainName: 'api.example.com',
      domainPrefix: 'api',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '203.0.113.7', userAgent: 'lambda-bundles-test' },
      requestId: 'request',
      routeKey: '$default',
      stage: '$default',
      time: '27/Nov/2026:04:00:00 +0000',
      timeEpoch: Date.now(),
    },
    isBase64Encoded: false,
    ...(body === undefined ? {} : { body }),
  };
}

const sqsEvent = (body: string) => ({
  Records: [
    {
      messageId: 'message-1',
      receiptHandle: 'receipt-1',
      body,
      attributes: { ApproximateReceiveCount: '1', SentTimestamp: String(Date.now()), SenderId: 'placeholder', ApproximateFirstReceiveTimestamp: String(Date.now()) },
      messageAttributes: {},
      md5OfBody: 'placeholder',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:placeholder',
      awsRegion: 'us-east-1',
    },
  ],
});

const errorCode = (answer: unknown) => {
  const { body } = answer as { body?: string };
  try {
    return (JSON.parse(body ?? '') as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
};

interface Case {
  events: unknown[];
  /** Checks each answer (in order) and the function's AWS calls. */
  check(answers: unknown[], calls: AwsCall[]): void;
}

const operations = (calls: AwsCall[]) => [...new Set(calls.map((c) => c.operation))];
const onlyDynamo = (calls: AwsCall[]) => expect(operations(calls).filter((o) => !o.startsWith('DynamoDB_'))).toEqual([]);
/** DynamoDB, the server secret and the signing key: what the stand-in serves; a call to anything else is refused. */
const onlyStoodIn = (calls: AwsCall[]) => expect(operations(calls).filter((o) => !/^(DynamoDB_20120810|secretsmanager|TrentService)\./.test(o))).toEqual([]);

/** What a route answers the seeded secret key: its status, and the error code when it is an error. */
interface Answer {
  status: number;
  code?: string;
}

/**
 * Each route's request with the seeded key, and its answer. Ids in paths are ones the table does not
 * hold (`sample_...`: a 404 is the route's answer for them), except where a case names its own; a
 * body is `{}` unless a case gives one: the route's own validation answers it. Only the database put
 * creates anything, under a name of its own, so no answer depends on which function ran first.
 */
const AUTHENTICATED: Record<string, { params?: Record<string, string>; body?: unknown; appKey?: true; uses?: string[]; answer: Answer }> = {
  'ai.models.list': { answer: { status: 200 } },
  'ai.chat.completions': { answer: { status: 400, code: 'invalid_body' } },
  'ai.embeddings': { answer: { status: 400, code: 'invalid_body' } },
  'ai.run': { answer: { status: 400, code: 'model_not_allowed' } },
  'ai.vector.ingest': { answer: { status: 409, code: 'vector_database_not_created' } },
  'ai.vector.query': { answer: { status: 409, code: 'vector_database_not_created' } },
  'ai.vector.documents.list': { answer: { status: 409, code: 'vector_database_not_created' } },
  'ai.vector.documents.delete': { answer: { status: 409, code: 'vector_database_not_created' } },
  'ai.uploads.create': { answer: { status: 400, code: 'invalid_body' } },
  'ai.uploads.get': { answer: { status: 404, code: 'upload_not_found' } },
  'ai.uploads.part': { answer: { status: 404, code: 'upload_not_found' } },
  'ai.uploads.complete': { answer: { status: 404, code: 'upload_not_found' } },
  'ai.knowledge.jobs.create': { answer: { status: 400, code: 'invalid_body' } },
  'ai.knowledge.jobs.list': { answer: { status: 200 } },
  'ai.knowledge.jobs.get': { answer: { status: 404, code: 'job_not_found' } },
  'ai.knowledge.jobs.cancel': { answer: { status: 404, code: 'job_not_found' } },
  'ai.collections.create': { answer: { status: 400, code: 'invalid_body' } },
  'ai.collections.list': { answer: { status: 200 } },
  'ai.collections.get': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.delete': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.items.create': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.items.list': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.items.get': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.items.delete': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.items.reprocess': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.items.chunks': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.items.package': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.items.vectors': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.query': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.collections.chat': { answer: { status: 404, code: 'collection_not_found' } },
  'ai.fallback': { answer: { status: 404, code: 'not_found' } },
  // OpenAI compatibility (docs/ai/openai-compatibility.md): refused by their body or ids here; test/api/openai-files-aws.test.ts stores a file through dynalite and s3rver.
  'ai.files.create': { answer: { status: 400, code: 'invalid_body' } },
  'ai.files.list': { answer: { status: 200 } },
  'ai.files.get': { answer: { status: 404, code: 'upload_not_found' } },
  'ai.files.content': { answer: { status: 404, code: 'upload_not_found' } },
  'ai.files.delete': { answer: { status: 404, code: 'upload_not_found' } },
  'ai.vector_stores.create': { answer: { status: 409, code: 'vector_database_not_created' } },
  'ai.vector_stores.list': { answer: { status: 200 } },
  ...Object.fromEntries(
    ['update', 'get', 'delete', 'search', 'files.create', 'files.list', 'files.get', 'files.update', 'files.delete', 'files.content', 'file_batches.create', 'file_batches.get', 'file_batches.cancel', 'file_batches.files'].map((r) => [
      `ai.vector_stores.${r}`,
      { answer: { status: 404, code: 'collection_not_found' } },
    ]),
  ),
  'ai.responses.create': { answer: { status: 400, code: 'invalid_body' } },
  'ai.responses.get': { answer: { status: 404, code: 'response_not_found' } },
  'ai.responses.delete': { answer: { status: 404, code: 'response_not_found' } },
  'events.events.publish': { answer: { status: 400, code: 'invalid_body' } },
  'events.subscriptions.list': { answer: { status: 200 } },
  'events.subscriptions.create': { answer: { status: 400, code: 'invalid_subscription' } },
  'events.subscriptions.delete': { answer: { status: 400, code: 'invalid_id' } },
  'events.subscriptions.rotate-secret': { answer: { status: 400, code: 'invalid_id' } },
  'events.subscriptions.pull': { answer: { status: 400, code: 'invalid_id' } },
  'events.subscriptions.ack': { answer: { status: 400, code: 'invalid_body' } },
  // Opened over HTTP, not as a WebSocket: the route's own refusal, after the credential and workspace checks.
  'events.subscriptions.stream': { answer: { status: 426, code: 'upgrade_required' } },
  'events.dead.list': { answer: { status: 200 } },
  'events.dead.replay': { answer: { status: 404, code: 'dead_event_not_found' } },
  'events.stats.get': { answer: { status: 200 } },
  'events.fallback': { answer: { status: 404, code: 'not_found' } },
  // For the application's users, so with its key; signed by KMS (the signing:sign grant).
  'data.end_user_tokens.create': { body: { user_id: 'user-1' }, appKey: true, uses: ['TrentService.Sign'], answer: { status: 200 } },
  'data.databases.list': { answer: { status: 200 } },
  'data.databases.put': { params: { database: 'bundles_put' }, answer: { status: 201 } },
  'data.collections.put': { answer: { status: 404, code: 'database_not_found' } },
  'data.collections.get': { answer: { status: 404, code: 'database_not_found' } },
  'data.records.create': { answer: { status: 404, code: 'database_not_found' } },
  'data.records.list': { answer: { status: 404, code: 'database_not_found' } },
  'data.records.get': { answer: { status: 404, code: 'database_not_found' } },
  'data.records.update': { answer: { status: 404, code: 'database_not_found' } },
  'data.records.delete': { answer: { status: 404, code: 'database_not_found' } },
  'data.batch': { answer: { status: 400, code: 'invalid_body' } },
  'data.blobs.put': { answer: { status: 400, code: 'invalid_name' } },
  'data.blobs.get': { answer: { status: 404, code: 'database_not_found' } },
  'data.blobs.head': { answer: { status: 404, code: 'database_not_found' } },
  'data.blobs.delete': { answer: { status: 404, code: 'database_not_found' } },
  'data.uploads.create': { answer: { status: 400, code: 'invalid_name' } },
  'data.uploads.part': { answer: { status: 404, code: 'database_not_found' } },
  'data.uploads.complete': { answer: { status: 400, code: 'invalid_body' } },
  'data.uploads.abort': { answer: { status: 404, code: 'database_not_found' } },
  'data.activity.list': { answer: { status: 200 } },
  'data.fallback': { answer: { status: 404, code: 'not_found' } },
};

/** The request with the seeded key for a route: its path with the seeded workspace, an operation id, its body. */
function authenticatedEvent(route: RouteDef, viaGateway: boolean) {
  const method = route.method === 'ANY' ? 'GET' : route.method;
  const spec = AUTHENTICATED[route.id];
  const writes = !['GET', 'HEAD', 'OPTIONS'].includes(method);
  const body = spec?.body ?? (writes && route.body !== 'stream' ? {} : undefined);
  const headers: Record<string, string> = {
    authorization: `Bearer ${spec?.appKey ? seeded.appKey : seeded.key}`,
    ...(writes ? { 'x-operation-id': `op-${route.id.replace(/\W/g, '-')}` } : {}),
    ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
  };
  const plain = httpEvent(method, samplePath(route, seeded.workspace), headers, body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body));
  return viaGateway ? routed(route, plain, seeded.workspace) : plain;
}

/** Status and error code of an answer (a streamed one's status is in its metadata, which the runner spreads in). */
const answerOf = (answer: unknown): Answer => {
  const status = (answer as { statusCode?: number }).statusCode ?? -1;
  const code = errorCode(answer);
  return code === undefined ? { status } : { status, code };
};

/**
 * A route with a credential: none is 401 missing_credentials before any AWS call; an unknown key is
 * looked up, then 401 invalid_credentials; the seeded key gets the route's own answer. `viaGateway`:
 * API Gateway's event (route key, path parameters), else a function URL's (a streamed route's).
 */
function credentialedCase(route: RouteDef, viaGateway = true): Case {
  const method = route.method === 'ANY' ? 'GET' : route.method;
  const path = samplePath(route);
  const event = (headers: Record<string, string>) => (viaGateway ? routed(route, httpEvent(method, path, headers)) : httpEvent(method, path, headers));
  return {
    events: [event({}), event({ authorization: `Bearer ${UNKNOWN_KEY}` }), authenticatedEvent(route, viaGateway)],
    check([none, unknown, known], calls) {
      expect(none).toMatchObject({ statusCode: 401 });
      expect(errorCode(none)).toBe('missing_credentials');
      expect(unknown).toMatchObject({ statusCode: 401 });
      expect(errorCode(unknown)).toBe('invalid_credentials');
      const answer = answerOf(known);
      const shown = JSON.stringify(known).slice(0, 300);
      expect(answer.status, shown).not.toBeOneOf([401, 403]);
      expect(answer.status, shown).toBeLessThan(500);
      expect(answer, shown).toEqual(AUTHENTICATED[route.id]?.answer);
      expect(operations(calls)).toEqual(expect.arrayContaining(['DynamoDB_20120810.GetItem', ...(AUTHENTICATED[route.id]?.uses ?? [])]));
      onlyStoodIn(calls);
    },
  };
}

/**
 * A console route (issue 37; lib/console.ts): a person's session cookie, not a key, and the CSRF step's
 * Origin check against CONSOLE_URL, which the stack gives each console function (the distribution's URL,
 * a placeholder here). With a session: none, or one the table does not hold, is `401 not_signed_in`
 * after looking it up. Without (sign-in, invitations; all POST): a call from another origin is `403
 * csrf_failed`; from the console's own, the route itself answers an empty body. Each carries CloudFront's
 * origin header (CONSOLE_ORIGIN_VERIFY's value); test/api/console-attack.test.ts checks the refusal without it.
 */
function consoleCase(route: RouteDef, f: StackFunction): Case {
  const method = route.method === 'ANY' ? 'GET' : route.method;
  // Every request comes through CloudFront, which adds the origin header (lib/console.ts).
  const through = { [CONSOLE_ORIGIN_HEADER]: f.environment.CONSOLE_ORIGIN_VERIFY };
  const event = (headers: Record<string, string>, cookies?: string[], body?: string) => ({ ...routed(route, httpEvent(method, samplePath(route), { ...through, ...headers }, body)), ...(cookies ? { cookies } : {}) });
  if (route.credentials !== 'none') {
    return {
      events: [event({}), event({}, [`session=${'0'.repeat(43)}`])],
      check([none, unknown], calls) {
        for (const answer of [none, unknown]) {
          expect(answer, JSON.stringify(answer).slice(0, 300)).toMatchObject({ statusCode: 401 });
          expect(errorCode(answer)).toBe('not_signed_in');
        }
        expect(operations(calls)).toContain('DynamoDB_20120810.GetItem');
        onlyDynamo(calls);
      },
    };
  }
  expect(route.method, route.id).toBe('POST');
  const own = new URL(f.environment.CONSOLE_URL).origin;
  const json = { 'content-type': 'application/json' };
  return {
    events: [event({ ...json, origin: 'https://elsewhere.example' }, undefined, '{}'), event({ ...json, origin: own }, undefined, '{}')],
    check([elsewhere, fromConsole], calls) {
      expect(elsewhere, JSON.stringify(elsewhere).slice(0, 300)).toMatchObject({ statusCode: 403 });
      expect(errorCode(elsewhere)).toBe('csrf_failed');
      // Its own answer: a validation error, or passkey options (which need no email).
      const answer = answerOf(fromConsole);
      expect(answer.status, JSON.stringify(fromConsole).slice(0, 300)).toBeLessThan(500);
      expect(answer.code).not.toBe('csrf_failed');
      onlyStoodIn(calls);
    },
  };
}

function caseOf(f: StackFunction): Case {
  const route = [...ROUTES].find((r) => r.id === f.name);
  if (f.kind === 'route' && route?.api === 'console') return consoleCase(route, f);
  // A streamed route's second function: its own route's request (grounded chat's path carries an id).
  if (f.kind === 'stream' && route) return credentialedCase(route, false);
  if (f.kind === 'route' && route && route.credentials !== 'none') return credentialedCase(route);
  if (f.kind === 'route' && route?.id.endsWith('.oauth.token')) {
    const form = (id: string, secret: string) => httpEvent('POST', route.path, { 'content-type': 'application/x-www-form-urlencoded' }, `grant_type=client_credentials&client_id=${id}&client_secret=${secret}`);
    return {
      events: [form('nobody', 'wrong'), form(seeded.client.id, seeded.client.secret)],
      check([unknown, known], calls) {
        // RFC 6749's error for a client that does not exist, after looking it up.
        expect(unknown).toMatchObject({ statusCode: 401 });
        expect(JSON.parse((unknown as { body: string }).body)).toMatchObject({ error: 'invalid_client' });
        // The seeded client gets a token KMS signed (the signing:sign grant).
        expect(known, JSON.stringify(known).slice(0, 300)).toMatchObject({ statusCode: 200 });
        expect(JSON.parse((known as { body: string }).body)).toMatchObject({ token_type: 'Bearer', access_token: expect.stringMatching(/^ey/) });
        expect(operations(calls)).toEqual(expect.arrayContaining(['DynamoDB_20120810.GetItem', 'TrentService.Sign']));
        onlyStoodIn(calls);
      },
    };
  }
  if (f.kind === 'route' && route?.method === 'OPTIONS') {
    const preflight = (origin: string) => routed(route, httpEvent('OPTIONS', samplePath(route), { origin, 'access-control-request-method': 'GET' }));
    return {
      events: [preflight('https://elsewhere.example'), preflight(seeded.origin)],
      check([unlisted, listed], calls) {
        // Spec 5 rule 6: an origin no publishable key lists is refused, after looking the origin up; the seeded key's origin is let through.
        expect(unlisted).toMatchObject({ statusCode: 403 });
        expect(errorCode(unlisted)).toBe('origin_not_allowed');
        expect(listed, JSON.stringify(listed).slice(0, 300)).toMatchObject({ statusCode: 204 });
        expect(calls.length).toBeGreaterThan(0);
        onlyDynamo(calls);
      },
    };
  }
  if (f.kind === 'route') {
    const socket = SOCKET_ROUTES.find((r) => r.id === f.name)!;
    expect(socket, f.name).toBeDefined();
    const streamPath = samplePath(ROUTES.find((r) => r.id === 'events.subscriptions.stream')!);
    const socketEvent = (routeKey: string, headers: Record<string, string> = {}) => ({ requestContext: { routeKey, connectionId: 'connection-1', requestId: 'request' }, headers, isBase64Encoded: false });
    const seededStream = samplePath(ROUTES.find((r) => r.id === 'events.subscriptions.stream')!, seeded.workspace);
    return {
      events: [socketEvent('$connect', { [STREAM_PATH_HEADER]: streamPath }), socketEvent('$disconnect'), socketEvent('$connect', { [STREAM_PATH_HEADER]: seededStream, authorization: `Bearer ${seeded.key}`, 'sec-websocket-protocol': 'service.v1' })],
      check([connect, disconnect, known], calls) {
        expect(connect).toMatchObject({ statusCode: 401 });
        // The seeded key passes; the sample subscription id is the route's own 400.
        expect(answerOf(known), JSON.stringify(known)).toEqual({ status: 400, code: 'invalid_id' });
        // An unknown connection's disconnect finds nothing to close.
        expect(disconnect).toEqual({ statusCode: 200 });
        expect(operations(calls)).toContain('DynamoDB_20120810.GetItem');
        onlyDynamo(calls);
      },
    };
  }
  if (f.name === 'webhooks' || f.name === 'streams') {
    return {
      events: [sqsEvent(JSON.stringify({ workspace_id: 'ws_01jd0000000000000000000000', subscription_id: 'sub_01jd0000000000000000000000', event_id: 'evt_01jd0000000000000000000000', attempt: 1 })), { Records: [] }],
      check([one, none], calls) {
        // A message for a subscription that is gone is dropped, not failed.
        expect(one).toEqual({ batchItemFailures: [] });
        expect(none).toEqual({ batchItemFailures: [] });
        expect(calls.length).toBeGreaterThan(0);
        onlyDynamo(calls);
      },
    };
  }
  if (f.name === 'jobs') {
    return {
      events: [sqsEvent(JSON.stringify({ kind: 'no-such-kind' })), { Records: [] }],
      check([unknown, none], calls) {
        // A job of a kind nobody runs is dropped (logged), not failed: it never would succeed.
        expect(unknown).toEqual({ batchItemFailures: [] });
        expect(none).toEqual({ batchItemFailures: [] });
        expect(calls).toEqual([]);
      },
    };
  }
  if (f.name === 'knowledge-items') {
    const item = { org: 'org_1', workspace: 'ws_1', collection: `col_${'0'.repeat(32)}`, item: `itm_${'0'.repeat(32)}` };
    return {
      events: [sqsEvent(JSON.stringify(item)), sqsEvent('not an item message')],
      check([gone, dropped], calls) {
        // An item that is not there (deleted meanwhile) is done with, not failed; a message that names no item is dropped.
        expect(gone).toEqual({ batchItemFailures: [] });
        expect(dropped).toEqual({ batchItemFailures: [] });
        expect(operations(calls)).toEqual(['DynamoDB_20120810.GetItem']);
      },
    };
  }
  if (f.name === 'knowledge-jobs') {
    const step = { org: 'org_1', app: '-', job: `job_${'0'.repeat(26)}`, step: 'probe' };
    return {
      events: [sqsEvent(JSON.stringify(step)), sqsEvent('not a job message')],
      check([gone, dropped], calls) {
        // A step of a job that is not there (or no longer running) is done with; a message that names no job is dropped (it never would succeed).
        expect(gone, JSON.stringify(gone)).toEqual({ batchItemFailures: [] });
        expect(dropped).toEqual({ batchItemFailures: [] });
        // The job looked up, nothing else: no step ran, nothing was sent.
        expect(operations(calls)).toEqual(['DynamoDB_20120810.GetItem']);
      },
    };
  }
  if (f.name === 'upload-checks') {
    const check = { org: 'org_1', id: `upl_${'0'.repeat(32)}`, engine_upload_id: 'engine-upload-1' };
    return {
      events: [sqsEvent(JSON.stringify(check)), sqsEvent('not a check message')],
      check([gone, dropped], calls) {
        // A check of an upload that is not there is done with; a message that is not a check is dropped (it never would succeed).
        expect(gone, JSON.stringify(gone)).toEqual({ batchItemFailures: [] });
        expect(dropped).toEqual({ batchItemFailures: [] });
        expect(calls.length).toBeGreaterThan(0);
        onlyDynamo(calls);
      },
    };
  }
  if (f.kind === 'edge') {
    // The Data distribution's upload relay: a GET (or a body that fits a function) goes on untouched.
    const request = { clientIp: '203.0.113.1', method: 'GET', uri: '/v1/databases', querystring: '', headers: { host: [{ key: 'Host', value: 'd.example' }] } };
    return {
      events: [{ Records: [{ cf: { config: { distributionDomainName: 'd.example', distributionId: 'D', eventType: 'origin-request', requestId: 'r' }, request } }] }],
      check([answer], calls) {
        expect(answer).toEqual(request);
        expect(calls).toEqual([]);
      },
    };
  }
  if (f.name === 'blob-arrivals') {
    const object = (key: string) => ({ Records: [{ eventName: 'ObjectCreated:Put', s3: { bucket: { name: 'blobs' }, object: { key, size: 1 } } }] });
    return {
      events: [object(`arrivals/org_1/db/${'a'.repeat(64)}.0123abcd`), object(`blobs/org_1/db/${'a'.repeat(64)}.0123abcd`)],
      check([file, other], calls) {
        // No arrival under that key (bytes sent again after it was settled): left alone; a key outside arrivals/ is not looked up.
        expect(file).toEqual({ settled: 0 });
        expect(other).toEqual({ settled: 0 });
        expect(operations(calls)).toEqual(['DynamoDB_20120810.Query']);
      },
    };
  }
  // The scheduled sweeps: an EventBridge event; an empty table has nothing to sweep.
  return {
    events: [{ version: '0', id: 'event-1', 'detail-type': 'Scheduled Event', source: 'aws.events', time: new Date().toISOString(), region: 'us-east-1', resources: [], detail: {} }],
    check([answer], calls) {
      expect(answer).toMatchObject({});
      expect(JSON.stringify(answer)).toMatch(/:0\b|\[\]/);
      expect(operations(calls).some((o) => /Query|Scan/.test(o))).toBe(true);
      onlyDynamo(calls);
    },
  };
}

describe('the Lambda bundles, as Lambda loads them', () => {
  it('the stack has a function for every route, the three streamed routes\' second functions, the twelve consumers and the upload relay', () => {
    expect(functions.filter((f) => f.kind === 'route').map((f) => f.name).sort()).toEqual([...ROUTES, ...SOCKET_ROUTES].map((r) => r.id).sort());
    expect(functions.filter((f) => f.kind === 'stream').map((f) => f.name).sort()).toEqual(['ai.chat.completions', 'ai.collections.chat', 'ai.responses.create']);
    expect(functions.filter((f) => f.kind === 'consumer').map((f) => f.name).sort()).toEqual(['blob-arrivals', 'collections-sweep', 'jobs', 'knowledge-items', 'knowledge-jobs', 'knowledge-jobs-sweep', 'outbox-sweep', 'platform-events-sweep', 'streams', 'upload-checks', 'uploads-sweep', 'webhooks']);
    expect(functions.filter((f) => f.kind === 'edge').map((f) => f.name)).toEqual(['data-upload-relay']);
    // Three streaming functions, twelve consumers, the relay.
    expect(functions.length).toBe(ROUTES.length + SOCKET_ROUTES.length + 16);
    // No handler module is left out of the stack (and so out of this test).
    expect([...new Set(functions.map((f) => f.entry))].sort()).toEqual(handlerModules());
  });

  it('no bundle holds the embedded engine, the local runtime, better-sqlite3 or ws, or imports anything but Node built-ins', () => {
    for (const f of functions) {
      const bundle = bundles.get(keyOf(f))!;
      // What esbuild left as an import (static, dynamic or require) that Node must resolve at run time.
      expect(bundle.inputs.filter((i) => /lambdas\/(engine\/embedded|local)\/|node_modules\/(better-sqlite3|ws|bindings)\//.test(i)), f.name).toEqual([]);
      expect(bundle.externalImports.filter((name) => !name.startsWith('node:') && !BUILTINS.has(name)), f.name).toEqual([]);
    }
  });

  it('the AWS stand-in refuses what a role does not allow, as IAM does, and serves what it does', async () => {
    const fn = (name: string) => functions.find((f) => f.kind === 'route' && f.name === name)!;
    // A key of its own with the function's role: these calls are not the function's own (checked below).
    const probeKey = (name: string) => `PROBE${accessKeyOf(fn(name))}`;
    for (const name of ['data.end_user_tokens.create', 'data.databases.list', 'data.activity.list', 'data.databases.put']) principals.set(probeKey(name), fn(name).allowed);
    const as = (name: string) => ({ region: 'us-east-1', endpoint: aws.endpoint, credentials: { accessKeyId: probeKey(name), secretAccessKey: 'placeholder' } });
    const denied = (name: string) => aws.calls.filter((c) => c.accessKeyId === probeKey(name) && c.denied).map((c) => c.denied);
    const keyId = JSON.parse(fn('data.databases.list').environment.SIGNING_KEY_IDS)[0] as string;
    const message = new TextEncoder().encode('header.payload');
    const signCommand = new SignCommand({ KeyId: keyId, Message: message, MessageType: 'RAW', SigningAlgorithm: 'ECDSA_SHA_256' });
    // Signing needs signing:sign; every function may read the public key.
    expect((await new KMSClient(as('data.end_user_tokens.create')).send(signCommand)).Signature?.length).toBeGreaterThan(0);
    await expect(new KMSClient(as('data.databases.list')).send(signCommand)).rejects.toMatchObject({ name: 'AccessDeniedException' });
    expect(denied('data.databases.list')).toEqual([`kms:Sign on ${keyId}`]);
    expect((await new KMSClient(as('data.databases.list')).send(new GetPublicKeyCommand({ KeyId: keyId }))).KeySpec).toBe('ECC_NIST_P256');
    // The server secret needs secret:read.
    const secretArn = fn('data.activity.list').environment.SERVER_SECRET_ARN;
    expect((await new SecretsManagerClient(as('data.activity.list')).send(new GetSecretValueCommand({ SecretId: secretArn }))).SecretString).toHaveLength(64);
    await expect(new SecretsManagerClient(as('data.databases.list')).send(new GetSecretValueCommand({ SecretId: secretArn }))).rejects.toMatchObject({ name: 'AccessDeniedException' });
    // A table:read function writes only activity items (its LeadingKeys); table:write writes any.
    const put = (pk: string) => new PutItemCommand({ TableName: dynalite.tableName, Item: { [TABLE_SCHEMA.partitionKey]: { S: pk }, [TABLE_SCHEMA.sortKey]: { S: 'probe' } } });
    await expect(new DynamoDBClient(as('data.databases.list')).send(put(`org#${seeded.org}`))).rejects.toMatchObject({ name: 'AccessDeniedException' });
    await new DynamoDBClient(as('data.databases.list')).send(put('act#probe'));
    await new DynamoDBClient(as('data.databases.put')).send(put('probe#written'));
    expect(denied('data.databases.list')).toHaveLength(3);
  });

  it('each function loads alone with its own environment, exports handler, and answers its event itself', async () => {
    const failures: string[] = [];
    const queue = [...functions];
    const worker = async () => {
      for (let f = queue.shift(); f; f = queue.shift()) {
        const accessKeyId = accessKeyOf(f);
        const c = caseOf(f);
        const outcome = await runAlone(bundles.get(keyOf(f))!.file, {
          environment: { ...f.environment, AWS_ACCESS_KEY_ID: accessKeyId },
          events: c.events,
          streaming: f.kind === 'stream',
          awsEndpoint: aws.endpoint,
          functionName: f.functionName,
        });
        const calls = aws.calls.filter((call) => call.accessKeyId === accessKeyId);
        try {
          expect(outcome.loadError).toBeUndefined();
          expect(outcome.results.map((r) => ('error' in r ? r.error : undefined)).filter(Boolean)).toEqual([]);
          // Nothing its role does not allow: a missing grant fails here.
          expect(calls.filter((call) => call.denied).map((call) => call.denied)).toEqual([]);
          c.check(
            outcome.results.map((r) => (r as { value: unknown }).value),
            calls,
          );
        } catch (error) {
          // The output's end: the function's last log lines (an error's, for a 500).
          failures.push(`${f.name} (${f.entry}): ${(error as Error).message}\n${JSON.stringify(outcome.results).slice(0, 600)}\n${outcome.loadError ?? ''}\n${outcome.output.slice(-1500)}`);
        }
      }
    };
    await Promise.all([worker(), worker()]);
    expect(failures, failures.join('\n\n')).toEqual([]);
  }, TIMEOUT_MS);
});
