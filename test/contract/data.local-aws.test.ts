/**
 * The Data API through `ENGINE=aws npm start` (bin/local.ts in a child process, real HTTP) against
 * dynalite and s3rver, which the server reaches only through the SDK's AWS_ENDPOINT_URL_DYNAMODB /
 * _S3: the shared Data service contract (databases, collections, records, batches, files), then a
 * file and the activity log with the tenant the server bootstrapped into the table. The contract's
 * tenants are made, and its items inspected, by an engine this process opens from the same
 * environment and code (lambdas/local/engine.ts). data.aws.test.ts runs the same contract in-process
 * on adapters built by hand.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { loadSettings } from '../../lambdas/shared/settings.js';
import { openLocalEngine, localStateDir } from '../../lambdas/local/engine.js';
import type { DevCredentials } from '../../lambdas/local/bootstrap.js';
import { startAwsEmulators, type AwsEmulators } from '../helpers/aws-emulators.js';
import { startLocalProcess, stopLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { dataServiceContract } from './data-service-contract.js';

let emulators: AwsEmulators;
let restoreEnv: () => void;
let server: LocalProcess | undefined;
/** The server's DATA_DIR, and this process's (its engine's embedded ports). */
const serverDir = mkdtempSync(join(tmpdir(), 'npm-start-aws-'));
const testDir = mkdtempSync(join(tmpdir(), 'npm-start-aws-test-'));

beforeAll(async () => {
  emulators = await startAwsEmulators();
  restoreEnv = emulators.apply();
  // One process whatever the cores, as the contract runs in-process elsewhere: it reads every change
  // back at once, and each worker keeps a collection for a second (data/collections.ts), as a Lambda instance does.
  server = await startLocalProcess({ ...emulators.env, DATA_DIR: serverDir, LOCAL_WORKERS: '1' });
});
afterAll(async () => {
  if (server) await stopLocalProcess(server, 'SIGTERM');
  restoreEnv?.();
  await emulators?.close();
  for (const dir of [serverDir, testDir]) rmSync(dir, { recursive: true, force: true });
});

dataServiceContract(
  'ENGINE=aws npm start (DynamoDB on dynalite, S3 on s3rver)',
  () => openLocalEngine('auto', loadSettings({ ...process.env, DATA_DIR: testDir })),
  async (engine) => ({ url: server!.urls.data, close: () => engine.close() }),
);

describe('ENGINE=aws npm start on dynalite and s3rver', () => {
  let credentials: DevCredentials;
  const data = (path: string, init: RequestInit = {}) =>
    fetch(`${server!.urls.data}${path}`, { ...init, headers: { authorization: `Bearer ${credentials.secret_key}`, ...init.headers } });

  beforeAll(() => {
    const stateDir = localStateDir(loadSettings({ ...process.env, DATA_DIR: serverDir }));
    credentials = JSON.parse(readFileSync(join(stateDir, 'credentials.json'), 'utf8'));
  });

  it('says which engine it serves over, and bootstrapped its tenant into the table with TransactWriteItems over HTTP', async () => {
    expect(server!.output()).toContain(`Engine aws: DynamoDB table ${emulators.dynamo.tableName}, S3 bucket ${emulators.s3.bucket}`);
    const org = await emulators.dynamo.client.send(
      new GetItemCommand({ TableName: emulators.dynamo.tableName, Key: { pk: { S: `org#${credentials.organization_id}` }, sk: { S: 'org' } } }),
    );
    expect(org.Item).toBeDefined();
    // The contract's writes above went through the server: this process sends its own in-process.
    expect(emulators.dynamoEndpoint.received.transactions).toBeGreaterThan(20);
  });

  it('stores a file in the s3rver bucket and serves it back', async () => {
    expect((await data('/v1/databases/media', { method: 'PUT' })).status).toBe(201);
    const bytes = Buffer.from('bytes kept by s3rver');
    const sha = createHash('sha256').update(bytes).digest('hex');
    const put = await data(`/v1/databases/media/blobs/${sha}`, { method: 'PUT', body: bytes });
    expect(put.status, await put.clone().text()).toBe(201);
    const listed = await emulators.s3.client.send(new ListObjectsV2Command({ Bucket: emulators.s3.bucket }));
    expect(listed.Contents?.some((o) => o.Key?.includes(sha))).toBe(true);
    const got = await data(`/v1/databases/media/blobs/${sha}`);
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it('lists those calls in the activity log, read back from the table', async () => {
    const res = await data('/v1/activity?limit=10');
    expect(res.status).toBe(200);
    const { items } = (await res.json()) as { items: { kind: string; method: string; route: string; status: number }[] };
    const calls = items.filter((i) => i.kind === 'api.call').map((i) => `${i.method} ${i.route} ${i.status}`);
    expect(calls).toEqual(
      expect.arrayContaining(['PUT /v1/databases/{database} 201', 'PUT /v1/databases/{database}/blobs/{sha256} 201', 'GET /v1/databases/{database}/blobs/{sha256} 200']),
    );
  });
});

describe('ENGINE=aws npm start refuses to start, naming what is missing, without a stack trace', () => {
  const refusal = async (env: Record<string, string>) => {
    const started = startLocalProcess({ ...emulators.env, DATA_DIR: testDir, ...env });
    const error = (await started.then(
      () => expect.fail('it started'),
      (e: Error) => e,
    )) as Error;
    expect(error.message).toMatch(/^exited 1: /);
    expect(error.message).not.toMatch(/\n\s+at /);
    return error.message;
  };

  it('without TABLE_NAME and BUCKET_NAME', async () => {
    expect(await refusal({ TABLE_NAME: '', BUCKET_NAME: '' })).toContain('ENGINE=aws: TABLE_NAME and BUCKET_NAME must be set');
  });

  it('when the table does not answer', async () => {
    expect(await refusal({ TABLE_NAME: 'no-such-table' })).toContain('ENGINE=aws: the first call to the table failed');
  });
});
