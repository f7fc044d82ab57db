/**
 * Where each client of the AWS engine sends, from the environment alone: the SDK's AWS_ENDPOINT_URL
 * for every service, AWS_ENDPOINT_URL_<SERVICE> winning for its own, CONNECTIONS_ENDPOINT for the API
 * Gateway Management API, and S3_FORCE_PATH_STYLE for the bucket's place. One call per port to a
 * server that records the request and answers an error (no retries): its signature names the service.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAwsEngine } from '../../lambdas/engine/aws/index.js';
import { AwsEventBusSender } from '../../lambdas/engine/aws/event-bus.js';
import { loadSettings } from '../../lambdas/shared/settings.js';
import type { Engine } from '../../lambdas/engine/ports.js';

interface Seen {
  /** The SigV4 signing name: dynamodb, s3, sqs, kms, secretsmanager, execute-api, events. */
  service: string;
  host: string;
  path: string;
}

async function recorder(): Promise<{ url: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    const scope = /Credential=[^/]+\/\d+\/[^/]+\/([^/]+)\//.exec(req.headers.authorization ?? '');
    seen.push({ service: scope?.[1] ?? '?', host: req.headers.host ?? '', path: req.url ?? '' });
    req.resume();
    res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' }).end('{"__type":"Recorded","message":"recorded"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://localhost:${(server.address() as AddressInfo).port}`, seen, server };
}

const BASE_ENV = {
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'test',
  AWS_SECRET_ACCESS_KEY: 'test',
  AWS_MAX_ATTEMPTS: '1',
};
const ENDPOINT_VARIABLES = ['AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_DYNAMODB', 'AWS_ENDPOINT_URL_S3', 'AWS_ENDPOINT_URL_SQS', 'AWS_ENDPOINT_URL_KMS', 'AWS_ENDPOINT_URL_SECRETS_MANAGER', 'AWS_ENDPOINT_URL_EVENTBRIDGE'];

const SETTINGS_ENV = {
  ENGINE: 'aws',
  TABLE_NAME: 'table',
  BUCKET_NAME: 'bucket',
  QUEUE_URLS: JSON.stringify({ webhooks: 'http://queue.invalid/000000000000/webhooks' }),
  SIGNING_KEY_IDS: JSON.stringify(['key-1']),
  SERVER_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:server',
  // The recorder is named `localhost`: a bucket in the host name would not resolve.
  S3_FORCE_PATH_STYLE: '1',
};

let a: Awaited<ReturnType<typeof recorder>>;
let b: Awaited<ReturnType<typeof recorder>>;
const saved = { ...process.env };
let engine: Engine | undefined;

beforeAll(async () => {
  [a, b] = await Promise.all([recorder(), recorder()]);
});
afterEach(async () => {
  await engine?.close();
  engine = undefined;
  for (const name of [...Object.keys(BASE_ENV), ...ENDPOINT_VARIABLES]) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
  a.seen.length = 0;
  b.seen.length = 0;
});
afterAll(() => Promise.all([a, b].map(({ server }) => new Promise((resolve) => server.close(resolve)))));

/** The engine from these variables (and the SDK's, put into process.env where it reads them). */
function engineWith(sdkEnv: Record<string, string>, settingsEnv: Record<string, string> = {}): Engine {
  Object.assign(process.env, BASE_ENV, sdkEnv);
  engine = createAwsEngine(loadSettings({ ...SETTINGS_ENV, ...settingsEnv }));
  return engine;
}

/** One call on every port the engine builds a client for; each fails on the recorder's answer. */
async function callEveryPort(e: Engine): Promise<void> {
  const calls: Promise<unknown>[] = [
    e.kv.get({ pk: 'p', sk: 's' }),
    e.blobs.head('some/key'),
    e.queue.send('webhooks', 'body'),
    e.signer.publicKeys(),
    e.secret.get(),
    e.upstreamKeys.get('route-key'),
  ];
  await Promise.allSettled(calls);
}

describe('the AWS engine\'s clients', () => {
  it('all send to AWS_ENDPOINT_URL (SQS too, whatever host its queue URLs name)', async () => {
    await callEveryPort(engineWith({ AWS_ENDPOINT_URL: a.url }));
    expect(a.seen.map((s) => s.service).sort()).toEqual(['dynamodb', 'kms', 's3', 'secretsmanager', 'secretsmanager', 'sqs']);
  });

  it('each send to its AWS_ENDPOINT_URL_<SERVICE>, which wins over AWS_ENDPOINT_URL', async () => {
    const services = { DYNAMODB: 'dynamodb', S3: 's3', SQS: 'sqs', KMS: 'kms', SECRETS_MANAGER: 'secretsmanager' };
    for (const [suffix, service] of Object.entries(services)) {
      await callEveryPort(engineWith({ AWS_ENDPOINT_URL: a.url, [`AWS_ENDPOINT_URL_${suffix}`]: b.url }));
      expect(new Set(b.seen.map((s) => s.service)), suffix).toEqual(new Set([service]));
      expect(a.seen.map((s) => s.service), suffix).not.toContain(service);
      await engine!.close();
      for (const r of [a, b]) r.seen.length = 0;
      delete process.env[`AWS_ENDPOINT_URL_${suffix}`];
    }
  });

  it('puts the bucket in the path with S3_FORCE_PATH_STYLE=1, in the host name without it', async () => {
    await engineWith({ AWS_ENDPOINT_URL_S3: b.url }).blobs.head('some/key').catch(() => undefined);
    expect(b.seen).toEqual([{ service: 's3', host: new URL(b.url).host, path: '/bucket/some/key' }]);
    await engine!.close();
    b.seen.length = 0;
    // Virtual-hosted: the request goes to bucket.localhost, which does not resolve here.
    await engineWith({ AWS_ENDPOINT_URL_S3: b.url }, { S3_FORCE_PATH_STYLE: '0' }).blobs.head('some/key').catch(() => undefined);
    expect(b.seen).toEqual([]);
  });

  it('send the API Gateway Management API to CONNECTIONS_ENDPOINT, which the SDK variables do not override', async () => {
    const e = engineWith({ AWS_ENDPOINT_URL: a.url }, { CONNECTIONS_ENDPOINT: `${b.url}/stage` });
    await e.connections.post('conn-1', 'frame').catch(() => undefined);
    expect(b.seen).toEqual([{ service: 'execute-api', host: new URL(b.url).host, path: '/stage/@connections/conn-1' }]);
    expect(a.seen).toEqual([]);
  });

  it('event bus: the sender takes AWS_ENDPOINT_URL (the setting); AWS_ENDPOINT_URL_EVENTBRIDGE reaches it when that is unset', async () => {
    Object.assign(process.env, BASE_ENV);
    await new AwsEventBusSender(a.url).putEvents('us-east-1', [{ eventBusArn: 'arn:aws:events:us-east-1:000000000000:event-bus/b', source: 's', detailType: 'd', detail: '{}', time: new Date() }]).catch(() => undefined);
    expect(a.seen.map((s) => s.service)).toEqual(['events']);
    process.env.AWS_ENDPOINT_URL_EVENTBRIDGE = b.url;
    await new AwsEventBusSender(undefined).putEvents('us-east-1', [{ eventBusArn: 'arn:aws:events:us-east-1:000000000000:event-bus/b', source: 's', detailType: 'd', detail: '{}', time: new Date() }]).catch(() => undefined);
    expect(b.seen.map((s) => s.service)).toEqual(['events']);
  });

  it('are destroyed by close(), so no socket holds the process open', async () => {
    const e = engineWith({ AWS_ENDPOINT_URL: a.url });
    await callEveryPort(e);
    const open = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    const before = open();
    await e.close();
    engine = undefined;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(open()).toBeLessThan(before);
  });
});
