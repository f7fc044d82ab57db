/**
 * Every function of the stack, loaded and called as Lambda does (docs/decisions/lambda-bundles.md):
 * its entry bundled with the stack's own settings, the bundle alone in an empty folder, a fresh `node`
 * with the template's environment for that function. It must load, export `handler`, and answer a
 * representative event with the route's (or consumer's) own answer, not an init or import error.
 * AWS is stood in for on the wire (startAwsStandIn): DynamoDB is a real dynalite, any other call is
 * refused and recorded, so each function's calls are checked too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ROUTES, SOCKET_ROUTES, STREAM_PATH_HEADER, type RouteDef } from '../../lambdas/http/routes.js';
import { TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';
import { PROJECT_ROOT } from '../../lib/function-defaults.js';
import { buildBundles, runAlone, stackFunctions, startAwsStandIn, type AwsCall, type Bundle, type StackFunction } from '../helpers/lambda-bundles.js';
import { startDynalite, type DynaliteTable } from '../helpers/dynalite.js';

const { functions, tables } = stackFunctions();
const UNKNOWN_KEY = `aik_${'ab'.repeat(32)}`;
const BUILTINS = new Set(builtinModules);
const keyOf = (f: StackFunction) => `${f.kind}:${f.name}`;

let outdir: string;
let bundles: Map<string, Bundle>;
let dynalite: DynaliteTable;
let aws: Awaited<ReturnType<typeof startAwsStandIn>>;

beforeAll(async () => {
  outdir = mkdtempSync(join(tmpdir(), 'lambda-bundles-'));
  bundles = await buildBundles(functions.map((f) => ({ key: keyOf(f), entry: f.entry, define: f.define })), outdir);
  const [main, ...others] = tables;
  // The template's tables under their placeholder names (their logical ids): the platform table with
  // its indexes (as the AWS adapter's tests make it), the others with their own keys.
  dynalite = await startDynalite(tables.find((t) => t.partitionKey === TABLE_SCHEMA.partitionKey)?.logicalId ?? main.logicalId);
  for (const t of others.filter((t) => t.logicalId !== dynalite.tableName)) await createPlainTable(dynalite.client, t);
  aws = await startAwsStandIn(dynalite);
}, 120_000);

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


/** A route's path with its parameters filled in. */
const samplePath = (route: RouteDef) =>
  route.path === '$default' ? '/v1/no-such-path' : route.path.replace('{proxy+}', 'v1/databases').replace(/\{([^}]+)\}/g, (_, name) => `sample_${name}`.slice(0, 20));

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

/** A route with a credential: none is 401 missing_credentials before any AWS call; an unknown key is looked up, then 401 invalid_credentials. */
function credentialedCase(method: string, path: string): Case {
  return {
    events: [httpEvent(method, path), httpEvent(method, path, { authorization: `Bearer ${UNKNOWN_KEY}` })],
    check([none, unknown], calls) {
      expect(none).toMatchObject({ statusCode: 401 });
      expect(errorCode(none)).toBe('missing_credentials');
      expect(unknown).toMatchObject({ statusCode: 401 });
      expect(errorCode(unknown)).toBe('invalid_credentials');
      expect(operations(calls)).toContain('DynamoDB_20120810.GetItem');
      onlyDynamo(calls);
    },
  };
}

function caseOf(f: StackFunction): Case {
  const route = [...ROUTES].find((r) => r.id === f.name);
  // A streamed route's second function: its own route's request (grounded chat's path carries an id).
  if (f.kind === 'stream' && route) return credentialedCase(route.method, samplePath(route));
  if (f.kind === 'route' && route && route.credentials !== 'none') return credentialedCase(route.method === 'ANY' ? 'GET' : route.method, samplePath(route));
  if (f.kind === 'route' && route?.id.endsWith('.oauth.token')) {
    return {
      events: [httpEvent('POST', route.path, { 'content-type': 'application/x-www-form-urlencoded' }, 'grant_type=client_credentials&client_id=nobody&client_secret=wrong')],
      check([answer], calls) {
        // RFC 6749's error for a client that does not exist, after looking it up.
        expect(answer).toMatchObject({ statusCode: 401 });
        expect(JSON.parse((answer as { body: string }).body)).toMatchObject({ error: 'invalid_client' });
        expect(operations(calls)).toContain('DynamoDB_20120810.GetItem');
        onlyDynamo(calls);
      },
    };
  }
  if (f.kind === 'route' && route?.method === 'OPTIONS') {
    return {
      events: [httpEvent('OPTIONS', samplePath(route), { origin: 'https://app.example', 'access-control-request-method': 'GET' })],
      check([answer], calls) {
        // Spec 5 rule 6: an origin no publishable key lists is refused, after looking the origin up.
        expect(answer).toMatchObject({ statusCode: 403 });
        expect(errorCode(answer)).toBe('origin_not_allowed');
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
    return {
      events: [socketEvent('$connect', { [STREAM_PATH_HEADER]: streamPath }), socketEvent('$disconnect')],
      check([connect, disconnect], calls) {
        expect(connect).toMatchObject({ statusCode: 401 });
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
  it('the stack has a function for every route, the streaming chat, the nine consumers and the upload relay', () => {
    expect(functions.filter((f) => f.kind === 'route').map((f) => f.name).sort()).toEqual([...ROUTES, ...SOCKET_ROUTES].map((r) => r.id).sort());
    expect(functions.filter((f) => f.kind === 'stream').map((f) => f.name).sort()).toEqual(['ai.chat.completions', 'ai.collections.chat']);
    expect(functions.filter((f) => f.kind === 'consumer').map((f) => f.name).sort()).toEqual(['blob-arrivals', 'collections-sweep', 'jobs', 'knowledge-items', 'outbox-sweep', 'platform-events-sweep', 'streams', 'upload-checks', 'uploads-sweep', 'webhooks']);
    expect(functions.filter((f) => f.kind === 'edge').map((f) => f.name)).toEqual(['data-upload-relay']);
    expect(functions.length).toBe(ROUTES.length + SOCKET_ROUTES.length + 12);
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

  it('each function loads alone with its own environment, exports handler, and answers its event itself', async () => {
    const failures: string[] = [];
    const queue = [...functions];
    const worker = async () => {
      for (let f = queue.shift(); f; f = queue.shift()) {
        // Letters and digits only: SigV4 splits its Credential on "/", which a nested stack's function id holds.
        const accessKeyId = `AKIA${f.logicalId.replace(/[^A-Za-z0-9]/g, '')}`;
        const c = caseOf(f);
        const outcome = await runAlone(bundles.get(keyOf(f))!.file, {
          environment: { ...f.environment, AWS_ACCESS_KEY_ID: accessKeyId },
          events: c.events,
          streaming: f.kind === 'stream',
          awsEndpoint: aws.endpoint,
          functionName: f.functionName,
        });
        try {
          expect(outcome.loadError).toBeUndefined();
          expect(outcome.results.map((r) => ('error' in r ? r.error : undefined)).filter(Boolean)).toEqual([]);
          c.check(
            outcome.results.map((r) => (r as { value: unknown }).value),
            aws.calls.filter((call) => call.accessKeyId === accessKeyId),
          );
        } catch (error) {
          failures.push(`${f.name} (${f.entry}): ${(error as Error).message}\n${JSON.stringify(outcome.results).slice(0, 600)}\n${outcome.loadError ?? ''}\n${outcome.output.slice(0, 600)}`);
        }
      }
    };
    await Promise.all([worker(), worker()]);
    expect(failures, failures.join('\n\n')).toEqual([]);
  }, 240_000);
});
