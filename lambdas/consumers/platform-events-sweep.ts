/**
 * The platform-events sweep in AWS: an EventBridge rule invokes this function every minute
 * (lib/webhook-delivery.ts). It publishes the Data API changes a write committed into its outbox item
 * (`dchg#<shard>`, lambdas/data/change-outbox.ts) but did not publish before it stopped, then deletes
 * the items (lambdas/events/platform-events.ts). A re-publish is deduplicated by the events'
 * idempotency keys. The local runtime runs the same sweep on a timer in every worker
 * (lambdas/local/queue-workers.ts).
 */
import type { Context } from 'aws-lambda';
import { getEngine } from '../engine/index.js';
import { sweepPlatformEvents } from '../events/platform-events.js';
import { inRequest, log } from '../shared/log.js';

/** Lines name the invocation (`request_id`). */
export function handler(_event?: unknown, context?: Context): Promise<{ swept: number }> {
  return inRequest({ request_id: context?.awsRequestId }, sweep);
}

async function sweep(): Promise<{ swept: number }> {
  const swept = await sweepPlatformEvents(await getEngine());
  if (swept) log.info('platform events swept', { swept });
  return { swept };
}
