import { Readable } from 'node:stream';
import { httpHandler } from '../../handler.js';
import { ModelRoutes } from '../../../ai/model-routes.js';
import { AiOrgSettings } from '../../../ai/org-settings.js';
import { outputCeiling, parseChatRequest, resolveRoute, upstreamChatBody } from '../../../ai/chat.js';
import { chatCompletion, chatStream } from '../../../ai/gateway.js';
import { DEFAULT_MAX_OUTPUT_TOKENS, estimateChat } from '../../../ai/estimate.js';
import { beginOperation, operationContext } from '../../../ai/operations.js';
import type { ChatChunk } from '../../../ai/types.js';
import { errorBody } from '../../error-response.js';
import { PlatformError } from '../../../shared/errors.js';
import { log } from '../../../shared/log.js';
import { holdSeconds, onceForOperation, replayed } from './answers.js';

/**
 * POST /v1/chat/completions (spec 4.3; docs/ai/chat.md). A streamed answer is server-sent events in
 * OpenAI's chunk format, each upstream chunk written as it arrives, ending `data: [DONE]`; an upstream
 * failure after the first chunk is an error event before the stream closes; a client that leaves
 * aborts the upstream call. Streamed replies are never kept for replay.
 */
export const handler = httpHandler('ai.chat.completions', async (req, { engine, principal, operationId, onClientGone }) => {
  const org = principal.organizationId;
  const now = () => engine.clock.now();
  const [aiSettings, routes] = await Promise.all([new AiOrgSettings(engine.kv, now).get(org), new ModelRoutes(engine.kv, now).list(org)]);
  const request = parseChatRequest(req.json, aiSettings.granted_fields);
  const route = await resolveRoute(engine, principal, routes, request.model, '/v1/chat/completions');
  const body = await upstreamChatBody(engine, org, route, request);
  // Each of the `n` choices may reach the ceiling.
  const estimate = estimateChat(request.messages, (outputCeiling(route, request) ?? DEFAULT_MAX_OUTPUT_TOKENS) * (request.n ?? 1), [request.tools, request.response_format]);
  const scope = { engine, principal };
  if (!request.stream) return onceForOperation(engine, principal, operationId!, route, () => chatCompletion(scope, route, body, estimate));

  // Streamed: the id is held while the stream runs (a second call is 409), then let go: nothing is kept.
  // An id whose non-streamed answer is kept replays that answer, as JSON (docs/ai/chat.md).
  const op = await beginOperation(engine, principal, operationId!, holdSeconds(route), operationContext(principal, route));
  if (op.kind === 'replay') return replayed(op.answer);
  const client = new AbortController();
  // A client that leaves while the upstream has not sent its first chunk aborts it too (the answer,
  // then a stream, takes over from there).
  const stopListening = onClientGone?.(() => client.abort());
  let chunks: AsyncGenerator<ChatChunk>;
  try {
    chunks = await chatStream({ ...scope, signal: client.signal }, route, body, estimate, request.stream_options?.include_usage === true);
  } catch (error) {
    await op.abandon();
    throw error;
  } finally {
    stopListening?.();
  }
  const stream = eventStream(serverSentEvents(chunks, () => op.abandon()), () => client.abort());
  return { status: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' }, body: stream };
});

/**
 * The events as a byte stream. Destroyed before its end (the client left), it aborts the upstream at
 * once: the pending read then fails, and the events' `finally` lets the id go. (Readable.from would
 * wait for the upstream's next chunk before it even reported the destroy. After a normal end there is
 * nothing to abort, and an abort builds a DOMException with its stack.)
 */
function eventStream(events: AsyncGenerator<string>, abortUpstream: () => void): Readable {
  let reading = false;
  return new Readable({
    async read() {
      if (reading) return;
      reading = true;
      try {
        for (;;) {
          const step = await events.next();
          if (this.destroyed) return;
          if (step.done) return void this.push(null);
          if (!this.push(step.value)) return;
        }
      } catch (error) {
        this.destroy(error as Error);
      } finally {
        reading = false;
      }
    },
    destroy(error, callback) {
      if (!this.readableEnded) abortUpstream();
      // Not awaited: a generator runs one step at a time, so return() waits for the read that the abort ends.
      events.return(undefined).catch(() => undefined);
      callback(error);
    },
  });
}

async function* serverSentEvents(chunks: AsyncGenerator<ChatChunk>, release: () => Promise<void>): AsyncGenerator<string> {
  let last: string;
  try {
    for await (const chunk of chunks) yield `data: ${JSON.stringify(chunk)}\n\n`;
    last = 'data: [DONE]\n\n';
  } catch (error) {
    const failure = error instanceof PlatformError ? error : new PlatformError('upstream_error', "The model route's upstream failed mid-stream.");
    if (!(error instanceof PlatformError)) log.error('chat stream failed', { error: String((error as Error)?.stack ?? error) });
    last = `data: ${JSON.stringify(errorBody(failure))}\n\n`;
  } finally {
    // The id is let go before the last event is written: a caller that sends it again once it has read
    // the end finds it free, on any worker. (A client that left ends the generator here too.)
    await release().catch(() => undefined);
  }
  yield last;
}
