/**
 * The `upload-checks` queue's consumer: finishes the SHA-256 check of an AI upload whose complete call
 * answered `202` before its check was done (lambdas/knowledge/uploads.ts, checkJoinedUpload;
 * docs/decisions/upload-checks.md). In AWS an SQS-triggered function with partial batch responses;
 * locally a receiver in the background processes (lambdas/local/queue-workers.ts). A check whose
 * store fails comes back after the queue's retrySeconds and, past its receives, rests in
 * `upload-checks-dead` (the upload stays `verifying` until a complete 15 minutes on queues its check anew, or it expires).
 */
import type { Engine, QueueConsumer } from '../engine/ports.js';
import { queueFunction } from './queue-function.js';
import { checkJoinedUpload, type UploadCheckMessage } from '../knowledge/uploads.js';
import { log } from '../shared/log.js';

const isCheck = (body: unknown): body is UploadCheckMessage =>
  typeof body === 'object' && body !== null && ['org', 'id', 'engine_upload_id'].every((k) => typeof (body as Record<string, unknown>)[k] === 'string');

export function uploadChecksConsumer(engine: Engine): QueueConsumer {
  return async (messages) => {
    const failed: string[] = [];
    await Promise.all(
      messages.map(async (message) => {
        let body: unknown;
        try {
          body = JSON.parse(message.body);
        } catch {
          body = undefined;
        }
        // Not ours to retry: a message that is not a check never will be.
        if (!isCheck(body)) return void log.error('upload check dropped: not a check message', { message_id: message.id });
        try {
          const outcome = await checkJoinedUpload(engine, body);
          log.info('upload checked', { upload: body.id, outcome });
        } catch (error) {
          log.warn('upload check failed; the message comes back', { message_id: message.id, upload: body.id, error: String(error) });
          failed.push(message.id);
        }
      }),
    );
    return { failed };
  };
}

export const handler = queueFunction('upload-checks', uploadChecksConsumer);
