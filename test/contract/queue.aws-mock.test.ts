/**
 * The SQS adapter against a mocked SQSClient (SQS cannot run here, so the full contract runs only on
 * the embedded queue): the commands and parameters sent, the receive-count mapping, error mapping,
 * limits checked before any call, and the Lambda handler's partial batch response.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  MessageNotInflight,
  QueueDoesNotExist,
  ReceiveMessageCommand,
  RequestThrottled,
  SendMessageCommand,
  SQSClient,
  SQSServiceException,
} from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { SqsQueue, sqsConsumerHandler } from '../../lambdas/engine/aws/queue.js';
import { EngineLimitError, EngineUnavailableError } from '../../lambdas/engine/errors.js';
import { QUEUES } from '../../lambdas/engine/queues.js';

const URLS = {
  webhooks: 'https://sqs.us-east-1.amazonaws.com/123456789012/webhooks',
  'webhooks-dead': 'https://sqs.us-east-1.amazonaws.com/123456789012/webhooks-dead',
  jobs: 'https://sqs.us-east-1.amazonaws.com/123456789012/jobs',
  'jobs-dead': 'https://sqs.us-east-1.amazonaws.com/123456789012/jobs-dead',
};

const sqs = mockClient(SQSClient);
let queue: SqsQueue;

beforeEach(() => {
  sqs.reset();
  queue = new SqsQueue(new SQSClient({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' } }), URLS);
});
afterEach(() => sqs.reset());

const inputs = <T extends object>(command: new (input: T) => unknown) =>
  sqs.commandCalls(command as never).map((c) => (c.args[0] as unknown as { input: T }).input);

describe('SqsQueue', () => {
  it('sends with the queue URL, body and delay, returning the message id', async () => {
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
    expect(await queue.send('jobs', 'hello', { delaySeconds: 30 })).toBe('m-1');
    expect(await queue.send('webhooks', 'now')).toBe('m-1');
    expect(inputs(SendMessageCommand)).toEqual([
      { QueueUrl: URLS.jobs, MessageBody: 'hello', DelaySeconds: 30 },
      { QueueUrl: URLS.webhooks, MessageBody: 'now', DelaySeconds: undefined },
    ]);
  });

  it('sends a group as the MessageGroupId (a fair queue on a standard queue), and none without one', async () => {
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm-2' });
    await queue.send('jobs', 'tenant', { group: 'org_123' });
    await queue.send('jobs', 'later', { group: 'org_456', delaySeconds: 5 });
    await queue.send('jobs', 'loose');
    const sent = inputs(SendMessageCommand);
    expect(sent[0]).toStrictEqual({ QueueUrl: URLS.jobs, MessageBody: 'tenant', DelaySeconds: undefined, MessageGroupId: 'org_123' });
    expect(sent[1]).toStrictEqual({ QueueUrl: URLS.jobs, MessageBody: 'later', DelaySeconds: 5, MessageGroupId: 'org_456' });
    expect(sent[2].MessageGroupId).toBeUndefined();
    // Refused before SQS, as SQS would refuse it.
    await expect(queue.send('jobs', 'x', { group: 'no spaces' })).rejects.toMatchObject({ limit: 'queue_group' });
    expect(inputs(SendMessageCommand)).toHaveLength(3);
  });

  it('receives with batch size, lease and the receive count attribute, and maps the messages', async () => {
    sqs.on(ReceiveMessageCommand).resolves({
      Messages: [
        { MessageId: 'a', Body: 'one', ReceiptHandle: 'r-a', Attributes: { ApproximateReceiveCount: '1' } },
        { MessageId: 'b', Body: 'two', ReceiptHandle: 'r-b', Attributes: { ApproximateReceiveCount: '4' } },
      ],
    });
    expect(await queue.receive('webhooks', { max: 7, visibilitySeconds: 60 })).toEqual([
      { id: 'a', body: 'one', receipt: 'r-a', receiveCount: 1 },
      { id: 'b', body: 'two', receipt: 'r-b', receiveCount: 4 },
    ]);
    expect(inputs(ReceiveMessageCommand)).toEqual([
      {
        QueueUrl: URLS.webhooks,
        MaxNumberOfMessages: 7,
        VisibilityTimeout: 60,
        MessageSystemAttributeNames: ['ApproximateReceiveCount'],
      },
    ]);
  });

  it('answers an empty list when SQS returns no messages', async () => {
    sqs.on(ReceiveMessageCommand).resolves({});
    expect(await queue.receive('jobs-dead', { max: 10, visibilitySeconds: 30 })).toEqual([]);
    expect(inputs(ReceiveMessageCommand)[0].QueueUrl).toBe(URLS['jobs-dead']);
  });

  it('deletes and changes visibility by receipt', async () => {
    sqs.on(DeleteMessageCommand).resolves({});
    sqs.on(ChangeMessageVisibilityCommand).resolves({});
    await queue.delete('jobs', 'r-1');
    await queue.changeVisibility('jobs', 'r-2', 0);
    await queue.changeVisibility('jobs', 'r-3', 600);
    expect(inputs(DeleteMessageCommand)).toEqual([{ QueueUrl: URLS.jobs, ReceiptHandle: 'r-1' }]);
    expect(inputs(ChangeMessageVisibilityCommand)).toEqual([
      { QueueUrl: URLS.jobs, ReceiptHandle: 'r-2', VisibilityTimeout: 0 },
      { QueueUrl: URLS.jobs, ReceiptHandle: 'r-3', VisibilityTimeout: 600 },
    ]);
  });

  it('ignores changeVisibility on a message no longer in flight, as the embedded queue does', async () => {
    sqs.on(ChangeMessageVisibilityCommand).rejects(new MessageNotInflight({ message: 'not in flight', $metadata: {} }));
    await expect(queue.changeVisibility('jobs', 'r-old', 10)).resolves.toBeUndefined();
  });

  it('checks limits before calling SQS', async () => {
    sqs.onAnyCommand().resolves({});
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm' });
    const limit = (p: Promise<unknown>) => p.then(() => 'sent', (e: unknown) => (e instanceof EngineLimitError ? e.limit : e));
    expect(await limit(queue.send('jobs', 'x', { delaySeconds: 901 }))).toBe('queue_delay');
    expect(await limit(queue.send('jobs', 'x', { delaySeconds: -1 }))).toBe('queue_delay');
    expect(await limit(queue.send('jobs', 'x'.repeat(256 * 1024 + 1)))).toBe('queue_message_size');
    expect(await limit(queue.send('jobs', 'é'.repeat(128 * 1024 + 1)))).toBe('queue_message_size');
    expect(await limit(queue.receive('jobs', { max: 0, visibilitySeconds: 30 }))).toBe('queue_batch');
    expect(await limit(queue.receive('jobs', { max: 11, visibilitySeconds: 30 }))).toBe('queue_batch');
    expect(await limit(queue.receive('jobs', { max: 1, visibilitySeconds: 43_201 }))).toBe('queue_visibility');
    expect(await limit(queue.changeVisibility('jobs', 'r', 43_201))).toBe('queue_visibility');
    await expect(queue.send('nope', 'x')).rejects.toThrow(/unknown queue/);
    await expect(queue.receive('nope', { max: 1, visibilitySeconds: 1 })).rejects.toThrow(/unknown queue/);
    expect(sqs.calls()).toHaveLength(0);
    // At the limits, the calls go through.
    expect(await queue.send('jobs', 'x'.repeat(256 * 1024), { delaySeconds: 900 })).toBe('m');
    expect(await queue.receive('jobs', { max: 10, visibilitySeconds: 43_200 })).toEqual([]);
    expect(sqs.calls()).toHaveLength(2);
  });

  it('maps throttling, 5xx and network failures to EngineUnavailableError and leaves other errors alone', async () => {
    const unavailable = [
      new RequestThrottled({ message: 'slow down', $metadata: { httpStatusCode: 400 } }),
      new SQSServiceException({ name: 'ThrottlingException', $fault: 'client', message: 'Rate exceeded', $metadata: { httpStatusCode: 400 } }),
      new SQSServiceException({ name: 'InternalError', $fault: 'server', message: 'oops', $metadata: { httpStatusCode: 500 } }),
      new SQSServiceException({ name: 'ServiceUnavailable', $fault: 'server', message: 'down', $metadata: { httpStatusCode: 503 } }),
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:443'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }),
      Object.assign(new Error('timed out'), { name: 'TimeoutError' }),
    ];
    for (const error of unavailable) {
      sqs.reset();
      sqs.onAnyCommand().rejects(error);
      const err = await queue.send('jobs', 'x').catch((e: unknown) => e);
      expect(err, String(error)).toBeInstanceOf(EngineUnavailableError);
      expect((err as Error).cause).toBe(error);
      await expect(queue.receive('jobs', { max: 1, visibilitySeconds: 1 })).rejects.toBeInstanceOf(EngineUnavailableError);
      await expect(queue.delete('jobs', 'r')).rejects.toBeInstanceOf(EngineUnavailableError);
      await expect(queue.changeVisibility('jobs', 'r', 1)).rejects.toBeInstanceOf(EngineUnavailableError);
    }
    sqs.reset();
    const missing = new QueueDoesNotExist({ message: 'no queue', $metadata: { httpStatusCode: 400 } });
    sqs.onAnyCommand().rejects(missing);
    await expect(queue.send('jobs', 'x')).rejects.toBe(missing);
  });
});

describe('sqsConsumerHandler', () => {
  const record = (messageId: string, body: string, receiveCount: number): SQSRecord => ({
    messageId,
    receiptHandle: `r-${messageId}`,
    body,
    attributes: {
      ApproximateReceiveCount: String(receiveCount),
      SentTimestamp: '1767225600000',
      SenderId: 'AIDAEXAMPLE',
      ApproximateFirstReceiveTimestamp: '1767225600001',
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:jobs',
    awsRegion: 'us-east-1',
  });

  it('hands the records to the consumer and reports the failed ones', async () => {
    const seen: unknown[] = [];
    const handler = sqsConsumerHandler(async (messages) => {
      seen.push(...messages);
      return { failed: messages.filter((m) => m.body === 'bad').map((m) => m.id) };
    });
    const event: SQSEvent = { Records: [record('a', 'good', 1), record('b', 'bad', 3), record('c', 'good', 2)] };
    expect(await handler(event)).toEqual({ batchItemFailures: [{ itemIdentifier: 'b' }] });
    expect(seen).toEqual([
      { id: 'a', body: 'good', receipt: 'r-a', receiveCount: 1 },
      { id: 'b', body: 'bad', receipt: 'r-b', receiveCount: 3 },
      { id: 'c', body: 'good', receipt: 'r-c', receiveCount: 2 },
    ]);
  });

  it("with its queue, shortens each failed message's lease to the queue's retrySeconds, so the long visibility timeout does not delay retries", async () => {
    sqs.on(ChangeMessageVisibilityCommand).resolves({});
    const handler = sqsConsumerHandler(async (messages) => ({ failed: messages.filter((m) => m.body === 'bad').map((m) => m.id) }), { queue, name: 'jobs' });
    const event: SQSEvent = { Records: [record('a', 'good', 1), record('b', 'bad', 3), record('c', 'bad', 1)] };
    expect(await handler(event)).toEqual({ batchItemFailures: [{ itemIdentifier: 'b' }, { itemIdentifier: 'c' }] });
    expect(inputs(ChangeMessageVisibilityCommand)).toEqual([
      { QueueUrl: URLS.jobs, ReceiptHandle: 'r-b', VisibilityTimeout: QUEUES.jobs.retrySeconds },
      { QueueUrl: URLS.jobs, ReceiptHandle: 'r-c', VisibilityTimeout: QUEUES.jobs.retrySeconds },
    ]);
    // A lease SQS will not shorten just runs out: the batch's answer is the same.
    sqs.reset();
    sqs.on(ChangeMessageVisibilityCommand).rejects(new RequestThrottled({ message: 'slow down', $metadata: {} }));
    expect(await handler(event)).toEqual({ batchItemFailures: [{ itemIdentifier: 'b' }, { itemIdentifier: 'c' }] });
    // Nothing failed: no call.
    sqs.reset();
    await handler({ Records: [record('a', 'good', 1)] });
    expect(inputs(ChangeMessageVisibilityCommand)).toEqual([]);
  });

  it('answers no failures when all succeed, and lets a throw fail the whole batch', async () => {
    expect(await sqsConsumerHandler(async () => ({ failed: [] }))({ Records: [record('a', 'x', 1)] })).toEqual({ batchItemFailures: [] });
    const boom = sqsConsumerHandler(async () => {
      throw new Error('boom');
    });
    await expect(boom({ Records: [record('a', 'x', 1)] })).rejects.toThrow('boom');
  });
});
