/**
 * The `streams` queue's consumer in AWS (lib/stream-delivery.ts): each message wakes one
 * subscription's WebSocket streams, whose sockets API Gateway holds, and sends them their frames
 * (lambdas/events/stream-remote.ts). Partial batch responses return only the failed wakes.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { getEngine } from '../engine/index.js';
import { sqsConsumerHandler } from '../engine/aws/queue.js';
import { inRequest } from '../shared/log.js';
import { streamsConsumer } from '../events/stream-remote.js';

type SqsHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

/** Built at the first invocation, as the webhooks consumer is (a bad setting fails the invocation, naming it). */
let consume: Promise<SqsHandler> | undefined;

/** Lines name the invocation (`request_id`), and each message's (`message_id`) while it is handled. */
export function handler(event: SQSEvent, context?: Context): Promise<SQSBatchResponse> {
  return inRequest({ request_id: context?.awsRequestId }, () => consumeBatch(event));
}

async function consumeBatch(event: SQSEvent): Promise<SQSBatchResponse> {
  consume ??= getEngine().then((engine) => sqsConsumerHandler(streamsConsumer(engine), { queue: engine.queue, name: 'streams' }));
  return (await consume)(event);
}
