/**
 * The collections sweep in AWS: an EventBridge rule invokes this function every few minutes
 * (lib/collections-sweep.ts). It removes the data of collections past their end
 * (sweepCollectionBatch, lambdas/knowledge/collections.ts), a batch at a time until nothing due is
 * left or its time budget is spent; the next run takes up the rest. Then it sends again the items whose
 * processing lease ran out (sweepProcessing), and reads on through the workspace indexes for entries no
 * item serves (sweepIndexes: a page per organization in turn, within its own budget). The local
 * runtime sweeps on a timer in every worker (lambdas/local/queue-workers.ts).
 */
import type { Context } from 'aws-lambda';
import { getEngine } from '../engine/index.js';
import type { Engine } from '../engine/ports.js';
import { sweepCollectionBatch } from '../knowledge/collections.js';
import { sweepIndexes } from '../knowledge/index-sweep.js';
import { sweepProcessing } from '../knowledge/processing.js';
import { inRequest, log } from '../shared/log.js';

export const COLLECTIONS_SWEEP = {
  /** Due entries read per batch (one query). */
  batch: 100,
  /** No batch starts after this long (real time): with the function's timeout (lib/collections-sweep.ts) it leaves a batch room to end. */
  budgetMs: 30_000,
} as const;

/** Lines name the invocation (`request_id`). */
export function handler(_event?: unknown, context?: Context): Promise<{ swept: number; index_entries_removed: number }> {
  return inRequest({ request_id: context?.awsRequestId }, async () => {
    const engine = await getEngine();
    const swept = await sweepCollections(engine);
    // Items whose processor died or whose message was lost are sent again (lambdas/knowledge/processing.ts).
    const resent = await sweepProcessing(engine, COLLECTIONS_SWEEP.batch);
    // Index entries left by a processor that died holding a deleted item (lambdas/knowledge/index-sweep.ts).
    const indexes = await sweepIndexes(engine);
    if (swept || resent || indexes.removed) log.info('collections swept', { swept, processing_entries: resent, index_pages: indexes.pages, index_entries_removed: indexes.removed });
    return { swept, index_entries_removed: indexes.removed };
  });
}

/**
 * Batches until nothing more is due or the budget is spent. Each batch continues after the last entry
 * the one before read, so entries that keep failing (they stay due) do not hold up the others; the
 * next run starts again from the oldest.
 */
export async function sweepCollections(engine: Engine, budgetMs: number = COLLECTIONS_SWEEP.budgetMs): Promise<number> {
  const until = Date.now() + budgetMs;
  let swept = 0;
  let cursor: string | undefined;
  for (;;) {
    const batch = await sweepCollectionBatch(engine, COLLECTIONS_SWEEP.batch, cursor);
    swept += batch.handled;
    cursor = batch.cursor;
    if (!cursor || Date.now() >= until) return swept;
  }
}
