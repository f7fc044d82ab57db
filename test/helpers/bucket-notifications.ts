/**
 * The blob bucket's ObjectCreated notifications as AWS delivers them: each event s3rver emits is handed
 * to the arrivals consumer (lambdas/consumers/blob-arrivals.ts). `withoutNotifications` models a late
 * or lost one; `delivered` waits for every delivery so far.
 */
import type { S3Event } from 'aws-lambda';
import { handler as settleNotification } from '../../lambdas/consumers/blob-arrivals.js';
import type { S3rverBucket } from './s3rver.js';

export interface BucketNotifications {
  delivered(): Promise<void>;
  withoutNotifications<T>(fn: () => Promise<T>): Promise<T>;
}

export function deliverNotifications(s3: S3rverBucket): BucketNotifications {
  let on = true;
  const deliveries: Promise<unknown>[] = [];
  s3.onEvent((event) => {
    if (on) deliveries.push(settleNotification(event as unknown as S3Event));
  });
  return {
    delivered: async () => void (await Promise.allSettled(deliveries)),
    async withoutNotifications(fn) {
      on = false;
      try {
        return await fn();
      } finally {
        on = true;
      }
    },
  };
}
