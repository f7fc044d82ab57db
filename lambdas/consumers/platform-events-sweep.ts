/**
 * The platform-events sweep in AWS: an EventBridge rule invokes this function every minute
 * (lib/webhook-delivery.ts). It publishes the Data API changes a write committed into its outbox item
 * (`dchg#<shard>`, lambdas/data/change-outbox.ts) but did not publish before it stopped, then deletes
 * the items (lambdas/events/platform-events.ts). A re-publish is deduplicated by the events'
 * idempotency keys. The local runtime runs the same sweep on a timer in every worker
 * (lambdas/local/queue-workers.ts).
 */
import { getEngine } from '../engine/index.js';
import { sweepPlatformEvents } from '../events/platform-events.js';
import { log } from '../shared/log.js';

export async function handler(): Promise<{ swept: number }> {
  const swept = await sweepPlatformEvents(await getEngine());
  if (swept) log.info('platform events swept', { swept });
  return { swept };
}
