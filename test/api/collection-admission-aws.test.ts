/**
 * Fair per organization on AWS (docs/decisions/knowledge-fairness.md): the item routes run as Lambda
 * behind API Gateway runs them (test/helpers/lambda-front.ts) over DynamoDB (dynalite, transactions
 * emulated), S3 (s3rver), and SQS on a client mock, whose SendMessage calls the test turns into the
 * events the knowledge consumer's function gets:
 *
 * - each item's message carries its organization as MessageGroupId (a fair queue on SQS);
 * - admission is the same conditional DynamoDB write as locally: past KNOWLEDGE_MAX_QUEUED_ITEMS an add
 *   is 429 rate_limited with Retry-After, other organizations are unaffected, concurrent adds never
 *   pass the cap, and the consumer's final write (or the collection's deletion) gives the slot back.
 */
import { randomUUID } from 'node:crypto';
import { mockClient } from 'aws-sdk-client-mock';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { handler as knowledgeItems } from '../../lambdas/consumers/knowledge-items.js';
import { SqsQueue } from '../../lambdas/engine/aws/queue.js';
import { useEngine } from '../../lambdas/engine/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { queuedItemsKey } from '../../lambdas/knowledge/collection-keys.js';
import { QUEUE_FULL_RETRY_SECONDS } from '../../lambdas/knowledge/collection-records.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { call, type Client } from '../helpers/knowledge-calls.js';
import { startLambdaFront, type LambdaFront } from '../helpers/lambda-front.js';

const URLS = { knowledge: 'https://sqs.us-east-1.amazonaws.com/000000000000/knowledge', jobs: 'https://sqs.us-east-1.amazonaws.com/000000000000/jobs' };
const sqs = mockClient(SQSClient);
let engine: Engine;
let gateway: LambdaFront;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  sqs.on(SendMessageCommand).callsFake(() => ({ MessageId: randomUUID() }));
  const queue = new SqsQueue(new SQSClient({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' } }), URLS);
  engine = (await startAwsDataEngine('collection-admission-aws', { queue })).engine;
  useEngine(engine);
  gateway = await startLambdaFront('ai');
}, 120_000);

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
  sqs.restore();
});

afterEach(() => useSettings());

async function newOrganization(name: string): Promise<{ id: string; client: Client }> {
  const tenants = new Tenants(engine.kv, () => Date.now());
  const org = await tenants.createOrganization(name);
  await tenants.createWorkspace(org.id, 'main');
  return { id: org.id, client: { url: gateway.url, key: (await tenants.createSecretKey(org.id)).key } };
}

const slotsHeld = async (org: string) => Number((await engine.kv.get(queuedItemsKey(org)))?.n ?? 0);
const add = (c: Client, col: string, i: number) => call(c, 'POST', `/v1/collections/${col}/items`, { text: `Note ${i} about the tides.`, filename: `n${i}.txt` });

/** The knowledge messages sent so far for `org`'s items, as SQS got them. */
const sentFor = (org: string) =>
  sqs
    .commandCalls(SendMessageCommand)
    .map((c) => c.args[0].input)
    .filter((m) => m.QueueUrl === URLS.knowledge && JSON.parse(m.MessageBody!).org === org);

/** What the event source mapping hands the consumer's function for one message. */
const eventOf = (body: string): SQSEvent => ({
  Records: [
    {
      messageId: randomUUID(),
      receiptHandle: 'r',
      body,
      attributes: { ApproximateReceiveCount: '1', SentTimestamp: String(Date.now()), SenderId: 'test', ApproximateFirstReceiveTimestamp: String(Date.now()) },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:knowledge',
      awsRegion: 'us-east-1',
    },
  ],
});

describe('fair per organization on DynamoDB and SQS', () => {
  it('sends each item grouped by its organization; past the cap an add is 429 with Retry-After; processing or deleting gives slots back', async () => {
    useSettings({ knowledgeMaxQueuedItems: 3 });
    const a = await newOrganization('aws-capped');
    const b = await newOrganization('aws-other');
    const colA = (await call(a.client, 'POST', '/v1/collections', { mode: 'download' })).body.id;
    const colB = (await call(b.client, 'POST', '/v1/collections', { mode: 'download' })).body.id;

    for (let i = 0; i < 3; i++) expect((await add(a.client, colA, i)).status).toBe(202);
    const refused = await add(a.client, colA, 3);
    expect([refused.status, refused.body.error.code]).toEqual([429, 'rate_limited']);
    expect(refused.headers.get('retry-after')).toBe(String(QUEUE_FULL_RETRY_SECONDS));
    expect((await add(b.client, colB, 0)).status).toBe(202);

    const sentA = sentFor(a.id);
    expect(sentA).toHaveLength(3);
    for (const m of sentA) expect(m.MessageGroupId).toBe(a.id);
    expect(sentFor(b.id).map((m) => m.MessageGroupId)).toEqual([b.id]);
    expect(await slotsHeld(a.id)).toBe(3);

    // The consumer's function processes one item: its final write gives the slot back.
    expect(await knowledgeItems(eventOf(sentA[0].MessageBody!))).toEqual({ batchItemFailures: [] });
    const done = (await call(a.client, 'GET', `/v1/collections/${colA}/items/${JSON.parse(sentA[0].MessageBody!).item}`)).body;
    expect(done.status).toBe('done');
    expect(await slotsHeld(a.id)).toBe(2);
    expect((await add(a.client, colA, 4)).status).toBe(202);

    // The collection goes with every slot its items held.
    expect((await call(a.client, 'DELETE', `/v1/collections/${colA}`)).status).toBe(200);
    expect(await slotsHeld(a.id)).toBe(0);
  }, 60_000);

  it('10 adds at once with a cap of 3: exactly 3 are admitted', async () => {
    useSettings({ knowledgeMaxQueuedItems: 3 });
    const c = await newOrganization('aws-burst');
    const col = (await call(c.client, 'POST', '/v1/collections', { mode: 'download' })).body.id;
    const statuses = (await Promise.all(Array.from({ length: 10 }, (_, i) => add(c.client, col, i)))).map((r) => r.status);
    expect(statuses.filter((s) => s === 202)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
    expect(await slotsHeld(c.id)).toBe(3);
    expect((await call(c.client, 'GET', `/v1/collections/${col}`)).body.counts.total).toBe(3);
  }, 60_000);
});
