/**
 * The Data API through the local server on `ENGINE=aws`, against dynalite and s3rver: the engine is
 * the one `npm start` opens from the environment (lambdas/local/engine.ts over the AWS engine's own
 * clients), pointed at the emulators only by the SDK's AWS_ENDPOINT_URL_DYNAMODB / _S3. The shared
 * Data service contract (databases, collections, records, batches, files) runs over real HTTP; then a
 * server started as bin/local.ts starts it (bootstrap, then the platform) answers a file and the
 * activity log. data.aws.test.ts runs the same contract on adapters built by hand.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import type { Engine } from '../../lambdas/engine/ports.js';
import { loadSettings } from '../../lambdas/shared/settings.js';
import { openLocalEngine, localStateDir } from '../../lambdas/local/engine.js';
import { bootstrap, type DevCredentials } from '../../lambdas/local/bootstrap.js';
import { startPlatform, type RunningPlatform } from '../../lambdas/local/platform.js';
import { startAwsEmulators, type AwsEmulators } from '../helpers/aws-emulators.js';
import { dataServiceContract } from './data-service-contract.js';

let emulators: AwsEmulators;
let restoreEnv: () => void;
const dataDir = mkdtempSync(join(tmpdir(), 'data-local-aws-'));

beforeAll(async () => {
  emulators = await startAwsEmulators();
  restoreEnv = emulators.apply();
  process.env.DATA_DIR = dataDir;
});
afterAll(async () => {
  restoreEnv?.();
  delete process.env.DATA_DIR;
  await emulators?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** The engine as `ENGINE=aws npm start` opens it, from the environment. */
const openEngine = () => openLocalEngine('auto', loadSettings());

dataServiceContract('ENGINE=aws through the local server (DynamoDB on dynalite, S3 on s3rver)', async () => {
  const engine = await openEngine();
  expect(engine.name).toBe('aws');
  return engine;
});

describe('ENGINE=aws npm start on dynalite and s3rver', () => {
  let platform: RunningPlatform | undefined;
  let engine: Engine;
  let credentials: DevCredentials;
  const data = (path: string, init: RequestInit = {}) =>
    fetch(`${platform!.urls.data}${path}`, { ...init, headers: { authorization: `Bearer ${credentials.secret_key}`, ...init.headers } });

  beforeAll(async () => {
    engine = await openEngine();
    ({ credentials } = await bootstrap(engine, localStateDir(loadSettings())));
    platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 } });
  });
  afterAll(async () => {
    if (platform) await platform.close();
    else await engine?.close();
  });

  it('ran the contract writes as TransactWriteItems on dynalite and kept the tenant there', async () => {
    expect(emulators.emulation.stats.executed).toBeGreaterThan(20);
    const items = await emulators.dynamo.client.send(new ScanCommand({ TableName: emulators.dynamo.tableName, Select: 'COUNT' }));
    expect(items.Count).toBeGreaterThan(0);
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

  it('lists the calls in the activity log, read back from the table', async () => {
    const res = await data('/v1/activity?limit=10');
    expect(res.status).toBe(200);
    const { items } = (await res.json()) as { items: { kind: string; method: string; route: string }[] };
    const calls = items.filter((i) => i.kind === 'api.call').map((i) => `${i.method} ${i.route}`);
    expect(calls).toEqual(expect.arrayContaining(['PUT /v1/databases/{database}', 'PUT /v1/databases/{database}/blobs/{sha256}', 'GET /v1/databases/{database}/blobs/{sha256}']));
  });
});
