/**
 * The `knowledge-jobs` queue's consumer (lambdas/knowledge/jobs/consumer.ts): in AWS an SQS-triggered
 * function with partial batch responses; locally a receiver in the background processes
 * (lambdas/local/queue-workers.ts).
 */
import { queueFunction } from './queue-function.js';
import { knowledgeJobsConsumer } from '../knowledge/jobs/consumer.js';

export const handler = queueFunction('knowledge-jobs', knowledgeJobsConsumer);
