/**
 * The queues the platform uses, with their redrive policy. The stack creates one SQS queue and one
 * dead-letter queue per entry; the embedded queue applies the same policy.
 */
export interface QueueDef {
  /** Receives after which a message moves to `<name>-dead`. */
  maxReceives: number;
  /** Default visibility lease, seconds. */
  visibilitySeconds: number;
}

export const QUEUES = {
  /** Webhook delivery attempts (Events API). */
  webhooks: { maxReceives: 6, visibilitySeconds: 60 },
  /**
   * Wake-ups of WebSocket streams in AWS (a subscription's inbox was written, or a lease ended): its
   * consumer sends frames to the subscription's open connections (docs/events/stream.md).
   */
  streams: { maxReceives: 3, visibilitySeconds: 60 },
  /** Background jobs (lease expiry, knowledge jobs). */
  jobs: { maxReceives: 3, visibilitySeconds: 300 },
  /**
   * Collection items to process (lambdas/knowledge/processing.ts): one message per item. The item's own
   * lease and the processing sweep recover a processor that died, so the visibility timeout only has
   * to outlast the function's (lib/knowledge-items.ts).
   */
  knowledge: { maxReceives: 5, visibilitySeconds: 900 },
} as const satisfies Record<string, QueueDef>;

export type QueueName = keyof typeof QUEUES;

export const deadLetterQueueName = (name: string) => `${name}-dead`;
