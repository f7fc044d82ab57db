/**
 * A queue consumer as the SQS-triggered Lambda function AWS invokes: the engine opened once per
 * environment, each batch answered with its failed messages (partial batch responses, their leases
 * shortened to the queue's retrySeconds), every log line naming the invocation.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { sqsConsumerHandler } from '../engine/aws/queue.js';
import { getEngine } from '../engine/index.js';
import type { Engine, QueueConsumer } from '../engine/ports.js';
import type { QueueName } from '../engine/queues.js';
import { inRequest } from '../shared/log.js';

export function queueFunction(name: QueueName, consumerOf: (engine: Engine) => QueueConsumer): (event: SQSEvent, context?: Context) => Promise<SQSBatchResponse> {
  let consume: Promise<(event: SQSEvent) => Promise<SQSBatchResponse>> | undefined;
  return (event, context) =>
    inRequest({ request_id: context?.awsRequestId }, async () => {
      consume ??= getEngine().then((engine) => sqsConsumerHandler(consumerOf(engine), { queue: engine.queue, name }));
      return (await consume)(event);
    });
}
