/**
 * The outbox sweep in AWS: an EventBridge rule invokes this function every minute
 * (lib/webhook-delivery.ts). It queues the webhook deliveries a publish committed but could not queue
 * before it stopped (lambdas/events/outbox.ts); the local runtime runs the same sweep on a timer in
 * every worker (lambdas/local/queue-workers.ts).
 */
import type { Context } from 'aws-lambda';
import { getEngine } from '../engine/index.js';
import { sweepOutbox } from '../events/outbox.js';
import { inRequest, log } from '../shared/log.js';

/** Lines name the invocation (`request_id`). */
export function handler(_event?: unknown, context?: Context): Promise<{ swept: number }> {
  return inRequest({ request_id: context?.awsRequestId }, sweep);
}

async function sweep(): Promise<{ swept: number }> {
  const swept = await sweepOutbox(await getEngine());
  if (swept) log.info('outbox swept', { swept });
  return { swept };
}
