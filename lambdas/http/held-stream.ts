/**
 * A streamed answer under an operation id (docs/ai/chat.md): the id is held while the stream runs (a
 * second call meanwhile is 409) and let go before the last event, or at once when the stream cannot
 * start; nothing is kept, and an id whose non-streamed answer is kept replays it as JSON. A client
 * that leaves before the first chunk aborts the upstream too (after it, the stream's own abort does).
 */
import type { OperationCall } from '../shared/operations.js';
import type { IdempotentOperation } from './idempotent.js';
import { serverSentEvents, type ServerSentEventsOptions } from './sse.js';
import type { ClientGone, HttpResponse } from './types.js';

export async function heldEventStream<C>(
  operation: IdempotentOperation,
  call: OperationCall<C>,
  onClientGone: ClientGone | undefined,
  open: (signal: AbortSignal) => Promise<AsyncGenerator<unknown>>,
  unexpected: ServerSentEventsOptions['unexpected'],
  logIds?: ServerSentEventsOptions['logIds'],
  format?: Pick<ServerSentEventsOptions, 'named'>,
): Promise<HttpResponse> {
  const held = await operation.hold(call);
  if (held.kind === 'replay') return held.response;
  const client = new AbortController();
  const stopListening = onClientGone?.(() => client.abort());
  let chunks: AsyncGenerator<unknown>;
  try {
    chunks = await open(client.signal);
  } catch (error) {
    await held.release();
    throw error;
  } finally {
    stopListening?.();
  }
  return serverSentEvents(chunks, { beforeLast: held.release, abortUpstream: () => client.abort(), unexpected, logIds, ...format });
}
