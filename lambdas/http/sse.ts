/**
 * Server-sent events (`text/event-stream`): an answer made of JSON chunks, each written as a `data:`
 * event as it arrives and ending `data: [DONE]` (OpenAI's streaming format); a failure part-way is an
 * error event in the error shape (`errorBody`) before the stream closes. A client that leaves aborts
 * the upstream at once. Every streamed route (chat, grounded collection chat) answers through here.
 */
import { Readable } from 'node:stream';
import { PlatformError } from '../shared/errors.js';
import { keepLogContext, log, type LogContext } from '../shared/log.js';
import { errorBody } from './error-response.js';
import type { HttpResponse } from './types.js';

export interface ServerSentEventsOptions {
  /** Runs before the last event (the end or the error) is written, and when the client leaves: e.g. lets an operation id go. */
  beforeLast?: () => Promise<void>;
  /** The client left before the end: stop the upstream now rather than at its next chunk. */
  abortUpstream?: () => void;
  /** What a failure that is not a PlatformError answers (it is logged), and the log's words for the stream. */
  unexpected?: { error: () => PlatformError; what: string };
  /** The request's log ids, for the failure's line: the runtime reads the stream after the handler returned. */
  logIds?: LogContext;
  /**
   * OpenAI's Responses format: each chunk (an object with a `type`) written `event: <type>` then its
   * `data:` line, and no `data: [DONE]` (the stream ends with its own last event). A failure the
   * chunks did not report themselves is an `error` event.
   */
  named?: true;
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };
const DEFAULT_UNEXPECTED = { error: () => new PlatformError('upstream_error', 'The upstream failed mid-stream.'), what: 'event stream' };

/** A 200 answer streaming `chunks` as server-sent events. */
export function serverSentEvents(chunks: AsyncGenerator<unknown>, options: ServerSentEventsOptions = {}): HttpResponse {
  return { status: 200, headers: SSE_HEADERS, body: eventStream(events(chunks, options), options.abortUpstream ?? (() => undefined)) };
}

/**
 * The events as a byte stream. Destroyed before its end (the client left), it aborts the upstream at
 * once: the pending read then fails, and the events' `finally` runs `beforeLast`. (Readable.from would
 * wait for the upstream's next chunk before it even reported the destroy. After a normal end there is
 * nothing to abort, and an abort builds a DOMException with its stack.)
 */
function eventStream(events: AsyncGenerator<string>, abortUpstream: () => void): Readable {
  let reading = false;
  // The runtime reads after the handler returned: each step still logs under the request's ids.
  const inRequestContext = keepLogContext();
  return new Readable({
    async read() {
      if (reading) return;
      reading = true;
      try {
        for (;;) {
          const step = await inRequestContext(() => events.next());
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

async function* events(chunks: AsyncGenerator<unknown>, options: ServerSentEventsOptions): AsyncGenerator<string> {
  const unexpected = options.unexpected ?? DEFAULT_UNEXPECTED;
  let last: string;
  try {
    // JSON.stringify writes no line break, so no chunk can end its event or start another.
    if (options.named) for await (const chunk of chunks) yield `event: ${(chunk as { type: string }).type}\ndata: ${JSON.stringify(chunk)}\n\n`;
    else for await (const chunk of chunks) yield `data: ${JSON.stringify(chunk)}\n\n`;
    last = options.named ? '' : 'data: [DONE]\n\n';
  } catch (error) {
    const failure = error instanceof PlatformError ? error : unexpected.error();
    if (!(error instanceof PlatformError)) log.error(`${unexpected.what} failed`, { ...options.logIds, error: String((error as Error)?.stack ?? error) });
    const { error: e } = errorBody(failure);
    last = options.named ? `event: error\ndata: ${JSON.stringify({ type: 'error', code: e.code, message: e.message, param: e.param })}\n\n` : `data: ${JSON.stringify(errorBody(failure))}\n\n`;
  } finally {
    // Before the last event is written: a caller that acts on the end (sends the operation id again)
    // finds it free, on any worker. (A client that left ends the generator here too.)
    await options.beforeLast?.().catch(() => undefined);
  }
  if (last) yield last;
}
