/**
 * The `knowledge` queue's consumer: each message names one collection item to process
 * (lambdas/knowledge/processing.ts). In AWS an SQS-triggered function with partial batch responses;
 * locally a receiver in every worker (lambdas/local/queue-workers.ts). An item's own faults end in
 * its `failed` state, never in a failed message; a message fails only when the store does, and comes
 * back after the queue's retrySeconds (lambdas/engine/queues.ts; past its receives, it rests in `knowledge-dead` while
 * the processing sweep still sends the item again).
 */
import type { Engine, QueueConsumer } from '../engine/ports.js';
import { queueFunction } from './queue-function.js';
import { processItem } from '../knowledge/processing.js';
import type { ProcessItemMessage } from '../knowledge/items.js';
import { log } from '../shared/log.js';

export function knowledgeConsumer(engine: Engine): QueueConsumer {
  return async (messages) => {
    const failed: string[] = [];
    await Promise.all(
      messages.map(async (message) => {
        let body: ProcessItemMessage;
        try {
          body = JSON.parse(message.body) as ProcessItemMessage;
          if (![body.org, body.workspace, body.collection, body.item].every((v) => typeof v === 'string')) throw new Error('not an item message');
        } catch {
          log.error('knowledge message dropped: not an item message', { message_id: message.id });
          return;
        }
        try {
          const outcome = await processItem(engine, body);
          log.info('item processed', { item: body.item, outcome });
        } catch (error) {
          log.warn('item processing failed; the message comes back', { message_id: message.id, item: body.item, error: String(error) });
          failed.push(message.id);
        }
      }),
    );
    return { failed };
  };
}

export const handler = queueFunction('knowledge', knowledgeConsumer);
