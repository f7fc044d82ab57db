/** Checks both queue adapters make, so a request SQS would refuse is refused locally too (and before anything is sent). */
import { EngineLimitError } from '../errors.js';
import { LIMITS } from '../limits.js';

const isInt = (n: number) => Number.isInteger(n);

/** SQS's MessageGroupId: 1 to 128 ASCII letters, digits and punctuation. */
const MESSAGE_GROUP = /^[\x21-\x7e]{1,128}$/;

export function assertQueueSend(body: string, delaySeconds: number | undefined, group?: string): void {
  if (group !== undefined && !MESSAGE_GROUP.test(group)) {
    throw new EngineLimitError('queue_group', 'group must be 1 to 128 ASCII letters, digits or punctuation');
  }
  if (delaySeconds !== undefined && (!isInt(delaySeconds) || delaySeconds < 0 || delaySeconds > LIMITS.queueMaxDelaySeconds)) {
    throw new EngineLimitError('queue_delay', `delaySeconds must be an integer in 0..${LIMITS.queueMaxDelaySeconds}`);
  }
  const bytes = Buffer.byteLength(body, 'utf8');
  if (bytes > LIMITS.queueMessageBytes) {
    throw new EngineLimitError('queue_message_size', `message body is ${bytes} bytes, over ${LIMITS.queueMessageBytes}`);
  }
}

export function assertQueueVisibility(visibilitySeconds: number): void {
  if (!isInt(visibilitySeconds) || visibilitySeconds < 0 || visibilitySeconds > LIMITS.queueMaxVisibilitySeconds) {
    throw new EngineLimitError('queue_visibility', `visibilitySeconds must be an integer in 0..${LIMITS.queueMaxVisibilitySeconds}`);
  }
}

export function assertQueueReceive(options: { max: number; visibilitySeconds: number }): void {
  if (!isInt(options.max) || options.max < 1 || options.max > LIMITS.queueMaxReceive) {
    throw new EngineLimitError('queue_batch', `max must be an integer in 1..${LIMITS.queueMaxReceive}`);
  }
  assertQueueVisibility(options.visibilitySeconds);
}
