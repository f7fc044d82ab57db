import type { Queue } from './ports.js';

/**
 * The queues the platform uses, with their redrive policy. The stack creates one SQS queue and one
 * dead-letter queue per entry; the embedded queue applies the same policy.
 */
export interface QueueDef {
  /** Receives after which a message moves to `<name>-dead`: at least 5 (lib/queues.ts refuses fewer). */
  maxReceives: number;
  /**
   * The lease a receive takes (in AWS the queue's visibility timeout): at least six times its consumer
   * function's timeout, AWS's rule for Lambda event sources (lib/function-defaults.ts sqsSource refuses
   * less), so a batch Lambda retries after a throttle is not received twice. Only a consumer that dies
   * or times out leaves a message in flight this long.
   */
  visibilitySeconds: number;
  /**
   * The lease a receiver of `npm start` takes (lambdas/local/queue-workers.ts): just over its consumer's
   * own time limit, as the visibility timeouts were before AWS's six-times rule. That rule is for the
   * Lambda poller, which can receive a batch and then be throttled; a local receiver hands each message
   * straight to its consumer, so only a killed process leaves a lease to run out, and its messages come
   * back this much later, not six consumer timeouts later.
   */
  localLeaseSeconds: number;
  /**
   * How long a message its consumer reported failed waits before it is received again: its lease is
   * shortened to this (ChangeMessageVisibility), so a long visibility timeout does not slow retries.
   */
  retrySeconds: number;
}

export const QUEUES = {
  /** Webhook delivery attempts (Events API); a failed attempt is a new message with its own delay (lambdas/events/delivery.ts). Consumer: 30 s. */
  webhooks: { maxReceives: 6, visibilitySeconds: 180, localLeaseSeconds: 60, retrySeconds: 60 },
  /**
   * Wake-ups of WebSocket streams in AWS (a subscription's inbox was written, or a lease ended): its
   * consumer sends frames to the subscription's open connections (docs/events/stream.md). Consumer: 30 s.
   */
  streams: { maxReceives: 5, visibilitySeconds: 180, localLeaseSeconds: 60, retrySeconds: 30 },
  /** Background jobs (lease expiry, knowledge jobs). Consumer: 240 s. */
  jobs: { maxReceives: 5, visibilitySeconds: 1440, localLeaseSeconds: 300, retrySeconds: 300 },
  /**
   * Collection items to process (lambdas/knowledge/processing.ts): one message per item. The item's own
   * lease and the processing sweep recover a processor that died. Consumer: 840 s.
   */
  knowledge: { maxReceives: 5, visibilitySeconds: 5040, localLeaseSeconds: 900, retrySeconds: 900 },
  /**
   * Knowledge jobs (lambdas/knowledge/jobs/pipeline.ts, docs/ai/knowledge-jobs.md): one message per
   * step of a job, and one per transcription piece. A step stops itself within STEP_BUDGET_MS and
   * sends itself again, so no run nears its consumer's 900 s; a processor that dies is found by the
   * jobs sweep through the job's own lease, not by this lease running out. Consumer: 900 s.
   */
  'knowledge-jobs': { maxReceives: 5, visibilitySeconds: 5400, localLeaseSeconds: 960, retrySeconds: 60 },
  /**
   * SHA-256 checks of AI uploads whose complete call could not wait for them (lambdas/knowledge/uploads.ts,
   * docs/decisions/upload-checks.md): one message per upload, received after the call's deadline. Consumer: 600 s.
   */
  'upload-checks': { maxReceives: 5, visibilitySeconds: 3600, localLeaseSeconds: 660, retrySeconds: 60 },
} as const satisfies Record<string, QueueDef>;

export type QueueName = keyof typeof QUEUES;

export const deadLetterQueueName = (name: string) => `${name}-dead`;

/**
 * Shortens the leases of the messages a consumer reported failed to their queue's `retrySeconds`, so
 * they come back then rather than at the end of the (much longer) visibility timeout. A lease that
 * cannot be shortened just runs out: the message is retried later, never lost, so errors are only
 * handed to `onError`.
 */
export async function retryFailedSoon(queue: Pick<Queue, 'changeVisibility'>, name: QueueName, receipts: readonly string[], onError: (error: unknown) => void = () => {}): Promise<void> {
  const { retrySeconds } = QUEUES[name];
  await Promise.all(receipts.map((receipt) => queue.changeVisibility(name, receipt, retrySeconds).catch(onError)));
}
