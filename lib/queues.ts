import { Duration } from 'aws-cdk-lib';
import { Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { QUEUES, deadLetterQueueName, type QueueName } from '../lambdas/engine/queues.js';

export interface PlatformQueue {
  readonly queue: Queue;
  readonly deadLetterQueue: Queue;
}

/**
 * Receives before a message is dead, at the least: a consumer's throttles and a deploy's cold starts
 * should not send work to the dead-letter queue (AWS suggests 5 or more for Lambda event sources).
 */
export const MIN_MAX_RECEIVES = 5;

/**
 * One SQS queue plus its dead-letter queue per QUEUES entry; the redrive policy mirrors the embedded
 * queue. The visibility timeout is QUEUES' visibilitySeconds, at least six times the consumer's
 * timeout (sqsSource checks, lib/function-defaults.ts).
 */
export class Queues extends Construct {
  readonly byName: Readonly<Record<QueueName, PlatformQueue>>;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    const secure = { enforceSSL: true, encryption: QueueEncryption.SQS_MANAGED } as const;
    const byName = {} as Record<QueueName, PlatformQueue>;
    for (const [name, def] of Object.entries(QUEUES) as [QueueName, (typeof QUEUES)[QueueName]][]) {
      if (def.maxReceives < MIN_MAX_RECEIVES) throw new Error(`queue ${name}: maxReceives ${def.maxReceives} is under ${MIN_MAX_RECEIVES} (lambdas/engine/queues.ts)`);
      const deadLetterQueue = new Queue(this, construct(deadLetterQueueName(name)), {
        ...secure,
        // SQS's maximum: 14 days to inspect and replay. Longer-lived dead letters live in DynamoDB.
        retentionPeriod: Duration.days(14),
      });
      const queue = new Queue(this, construct(name), {
        ...secure,
        visibilityTimeout: Duration.seconds(def.visibilitySeconds),
        deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: def.maxReceives },
      });
      byName[name] = { queue, deadLetterQueue };
    }
    this.byName = byName;
  }

  /** Queue name (dead-letter queues included) -> URL: the QUEUE_URLS map the AWS engine reads. */
  urls(): Record<string, string> {
    const urls: Record<string, string> = {};
    for (const [name, { queue, deadLetterQueue }] of Object.entries(this.byName)) {
      urls[name] = queue.queueUrl;
      urls[deadLetterQueueName(name)] = deadLetterQueue.queueUrl;
    }
    return urls;
  }
}

/** `webhooks-dead` -> `WebhooksDead`. */
const construct = (name: string) => name.split('-').map((w) => w[0].toUpperCase() + w.slice(1)).join('');
