/**
 * The `knowledge-jobs` queue's consumer: each message names one step of one job, or one
 * transcription piece (pipeline.ts). A job's own faults end in its `failed` state, never in a failed
 * message; a message fails only when the store does, and comes back after the queue's retrySeconds.
 */
import type { Engine, QueueConsumer } from '../../engine/ports.js';
import { log } from '../../shared/log.js';
import { parseJobMessage, runJobMessage, type JobEvents } from './pipeline.js';

export function knowledgeJobsConsumer(engine: Engine, events?: JobEvents): QueueConsumer {
  return async (messages) => {
    const failed: string[] = [];
    await Promise.all(
      messages.map(async (message) => {
        const body = parseJobMessage(message.body);
        if (!body) return void log.error('knowledge-jobs message dropped: not a job message', { message_id: message.id });
        try {
          await runJobMessage(engine, body, events);
        } catch (error) {
          log.warn('knowledge job step failed; the message comes back', { message_id: message.id, job: body.job, error: String(error) });
          failed.push(message.id);
        }
      }),
    );
    return { failed };
  };
}
