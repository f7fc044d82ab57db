/**
 * The uploads sweep in AWS: an EventBridge rule invokes this function every few minutes
 * (lib/uploads-sweep.ts). It aborts the parts of expired unfinished AI uploads and deletes stored bytes
 * no live upload names (sweepUploadBatch, lambdas/knowledge/uploads.ts), a batch at a time until
 * nothing due is left or its time budget is spent; the next run takes up the rest. Every upload start
 * sweeps a few entries too, and the local runtime sweeps on a timer in every worker
 * (lambdas/local/queue-workers.ts).
 */
import type { Context } from 'aws-lambda';
import { getEngine } from '../engine/index.js';
import type { Engine } from '../engine/ports.js';
import { sweepUploadBatch } from '../knowledge/uploads.js';
import { inRequest, log } from '../shared/log.js';

export const UPLOADS_SWEEP = {
  /** Due entries read per batch (one query). */
  batch: 100,
  /**
   * No batch starts after this long (real time: the engine's clock may be a test's): with the function's
   * timeout (lib/uploads-sweep.ts) it leaves a batch of 100 entries, a few requests each, room to end.
   */
  budgetMs: 30_000,
} as const;

/** Lines name the invocation (`request_id`). */
export function handler(_event?: unknown, context?: Context): Promise<{ swept: number }> {
  return inRequest({ request_id: context?.awsRequestId }, async () => {
    const swept = await sweepUploads(await getEngine());
    if (swept) log.info('uploads swept', { swept });
    return { swept };
  });
}

/**
 * Batches until nothing more is due or the budget is spent. Each batch continues after the last entry
 * the one before read, so entries that keep failing (they stay due) do not hold up the others; the
 * next run starts again from the oldest.
 */
export async function sweepUploads(engine: Engine, budgetMs: number = UPLOADS_SWEEP.budgetMs): Promise<number> {
  const until = Date.now() + budgetMs;
  let swept = 0;
  let cursor: string | undefined;
  for (;;) {
    const batch = await sweepUploadBatch(engine, UPLOADS_SWEEP.batch, cursor);
    swept += batch.handled;
    cursor = batch.cursor;
    if (!cursor || Date.now() >= until) return swept;
  }
}
