/**
 * Queue on SQS standard queues (fair queues when messages carry a group). The redrive policy (QUEUES)
 * lives on the queues the stack creates, so this adapter only maps calls; limits are checked in code
 * first, exactly as the embedded queue does.
 * `sqsConsumerHandler` adapts a QueueConsumer to an SQS-triggered Lambda with partial batch responses
 * (the event source mapping needs `ReportBatchItemFailures`).
 */
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { Queue, QueueConsumer, QueueMessage, QueueSendOptions } from '../ports.js';
import { assertQueueReceive, assertQueueSend, assertQueueVisibility } from '../adapter-kit/queue-checks.js';
import { callAws, isNotInFlight } from './errors.js';
import { retryFailedSoon, type QueueName } from '../queues.js';

export class SqsQueue implements Queue {
  /** `urls`: queue name (see queues.ts, dead-letter queues included) -> SQS queue URL. */
  constructor(private readonly client: SQSClient, private readonly urls: Record<string, string>) {}

  private url(queue: string): string {
    const url = Object.hasOwn(this.urls, queue) ? this.urls[queue] : undefined;
    if (!url) throw new Error(`unknown queue: ${queue}`);
    return url;
  }

  /**
   * A group is the message's MessageGroupId: on a standard queue that makes it a fair queue, where SQS
   * serves the messages of quiet groups before those of a group holding a backlog in flight.
   */
  async send(queue: string, body: string, options: QueueSendOptions = {}): Promise<string> {
    const QueueUrl = this.url(queue);
    assertQueueSend(body, options.delaySeconds, options.group);
    const out = await callAws('SQS SendMessage', () =>
      this.client.send(new SendMessageCommand({ QueueUrl, MessageBody: body, DelaySeconds: options.delaySeconds, MessageGroupId: options.group })),
    );
    if (!out.MessageId) throw new Error('SQS SendMessage returned no MessageId');
    return out.MessageId;
  }

  async receive(queue: string, options: { max: number; visibilitySeconds: number }): Promise<QueueMessage[]> {
    const QueueUrl = this.url(queue);
    assertQueueReceive(options);
    const out = await callAws('SQS ReceiveMessage', () =>
      this.client.send(
        new ReceiveMessageCommand({
          QueueUrl,
          MaxNumberOfMessages: options.max,
          VisibilityTimeout: options.visibilitySeconds,
          MessageSystemAttributeNames: ['ApproximateReceiveCount'],
        }),
      ),
    );
    return (out.Messages ?? []).map((m) => {
      if (!m.MessageId || m.Body === undefined || !m.ReceiptHandle) throw new Error('SQS ReceiveMessage returned an incomplete message');
      return {
        id: m.MessageId,
        body: m.Body,
        receipt: m.ReceiptHandle,
        receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 1),
      };
    });
  }

  /** SQS accepts a stale receipt and deletes nothing, like the embedded queue. */
  async delete(queue: string, receipt: string): Promise<void> {
    const QueueUrl = this.url(queue);
    await callAws('SQS DeleteMessage', () => this.client.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: receipt })));
  }

  /** A message no longer in flight is left alone (SQS answers MessageNotInflight), like the embedded queue. */
  async changeVisibility(queue: string, receipt: string, visibilitySeconds: number): Promise<void> {
    const QueueUrl = this.url(queue);
    assertQueueVisibility(visibilitySeconds);
    try {
      await callAws('SQS ChangeMessageVisibility', () =>
        this.client.send(new ChangeMessageVisibilityCommand({ QueueUrl, ReceiptHandle: receipt, VisibilityTimeout: visibilitySeconds })),
      );
    } catch (error) {
      if (isNotInFlight(error)) return;
      throw error;
    }
  }
}

/**
 * Lambda handler for an SQS event source: runs the consumer and answers a partial batch response.
 * With `retry` (the queue port and the queue's name), each failed message's lease is first shortened
 * to the queue's retrySeconds (QUEUES): the visibility timeout is six times the function's timeout
 * (lib/queues.ts), far longer than a failed message should wait.
 */
export function sqsConsumerHandler(consumer: QueueConsumer, retry?: { queue: Pick<Queue, 'changeVisibility'>; name: QueueName }): (event: SQSEvent) => Promise<SQSBatchResponse> {
  return async (event) => {
    const messages: QueueMessage[] = event.Records.map((r) => ({
      id: r.messageId,
      body: r.body,
      receipt: r.receiptHandle,
      receiveCount: Number(r.attributes.ApproximateReceiveCount),
    }));
    const { failed } = await consumer(messages);
    if (retry && failed.length) {
      const receipts = new Map(messages.map((m) => [m.id, m.receipt]));
      await retryFailedSoon(retry.queue, retry.name, failed.flatMap((id) => receipts.get(id) ?? []));
    }
    return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
  };
}
