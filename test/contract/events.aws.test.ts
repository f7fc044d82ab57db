/**
 * The Events service suite on the AWS engine's adapters: DynamoDB on dynalite (TransactWriteItems
 * emulated), SQS through aws-sdk-client-mock (it cannot run here): publish sends a webhook subscription's
 * deliveries to the queue's URL, which the mock records.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { DeleteMessageCommand, ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { SqsQueue } from '../../lambdas/engine/aws/queue.js';
import { bootstrap } from '../../lambdas/local/bootstrap.js';
import { startPlatform } from '../../lambdas/local/platform.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { eventsServiceContract } from './events-service-contract.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';

const sqs = mockClient(SQSClient);
sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
sqs.on(ReceiveMessageCommand).resolves({ Messages: [] });
sqs.on(DeleteMessageCommand).resolves({});
const URLS = { webhooks: 'https://sqs.us-east-1.amazonaws.com/111122223333/webhooks', 'webhooks-dead': 'https://sqs.us-east-1.amazonaws.com/111122223333/webhooks-dead', jobs: 'https://sqs.us-east-1.amazonaws.com/111122223333/jobs', 'jobs-dead': 'https://sqs.us-east-1.amazonaws.com/111122223333/jobs-dead' };

eventsServiceContract('aws (DynamoDB on dynalite, SQS on a client mock)', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
  const { engine } = await startAwsDataEngine('events-aws', { clock, queue: new SqsQueue(new SQSClient({ region: 'us-east-1' }), URLS) });
  const dataDir = mkdtempSync(join(tmpdir(), 'events-aws-creds-'));
  const { credentials } = await bootstrap(engine, dataDir);
  const platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 } });
  registerApiOrigins(platform.urls);
  return {
    urls: platform.urls,
    credentials,
    clock,
    close: async () => {
      await platform.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
});

// After the suite (tests in a file run in order): webhook deliveries went to the SQS queue's URL.
it('queued webhook deliveries through SQS', () => {
  const sends = sqs.commandCalls(SendMessageCommand).map((c) => c.args[0].input);
  expect(sends.length).toBeGreaterThan(0);
  for (const input of sends) {
    expect(input.QueueUrl).toBe(URLS.webhooks);
    expect(JSON.parse(input.MessageBody!)).toMatchObject({ event_id: expect.stringMatching(/^evt_/), subscription_id: expect.stringMatching(/^sub_/), attempt: 1 });
  }
});
afterAll(() => sqs.restore());
