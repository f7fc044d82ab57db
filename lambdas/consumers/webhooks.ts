/**
 * The `webhooks` queue's consumer in AWS: an SQS-triggered function with partial batch responses
 * (the event source mapping reports `ReportBatchItemFailures`, lib/webhook-delivery.ts). The very
 * consumer the local runtime runs in every worker (lambdas/local/queue-workers.ts): every message of
 * a batch is attempted at once, and a message whose attempt failed on the engine comes back after
 * the queue's retrySeconds (lambdas/engine/queues.ts).
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { eventBusSender, getEngine } from '../engine/index.js';
import { sqsConsumerHandler } from '../engine/aws/queue.js';
import { inRequest } from '../shared/log.js';
import { webhookConsumer } from '../events/delivery.js';

type SqsHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

/**
 * Built at the first invocation, not at import: the settings are read then, and a bad one fails the
 * invocation (the whole batch returns to the queue) with the SettingsError naming it.
 */
let consume: Promise<SqsHandler> | undefined;

/** Lines name the invocation (`request_id`), and each message's (`message_id`) while it is handled. */
export function handler(event: SQSEvent, context?: Context): Promise<SQSBatchResponse> {
  return inRequest({ request_id: context?.awsRequestId }, () => consumeBatch(event));
}

async function consumeBatch(event: SQSEvent): Promise<SQSBatchResponse> {
  consume ??= getEngine().then((engine) => sqsConsumerHandler(webhookConsumer(engine, { eventBus: eventBusSender() }), { queue: engine.queue, name: 'webhooks' }));
  return (await consume)(event);
}
