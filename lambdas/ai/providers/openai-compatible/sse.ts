import type { Readable } from 'node:stream';
import { upstreamError } from '../../upstream-errors.js';

const LF = 0x0a;
const CR = 0x0d;

/**
 * Reads server-sent events (text/event-stream) from a byte stream as it arrives: yields each event's
 * `data` (lines joined by "\n"), ignoring comments, ids and event names. An event ends at a blank line.
 *
 * Linear in the bytes read: each byte is scanned once (the bytes of a line not yet ended are kept as
 * pieces, never searched again) and a line is decoded once, at its end. Bytes, not text: a line ends
 * at CR, LF or CRLF, and neither byte occurs inside a UTF-8 sequence. A line, or an event's data, over
 * `maxEventBytes` is an upstream error (502 upstream_error), and so is a body that breaks off; the read
 * stops there and the connection is closed. When `signal` ended the call (timeout, client gone), its
 * own error is thrown instead, for the gateway to map.
 */
export async function* readServerSentEvents(body: Readable, maxEventBytes: number, signal: AbortSignal): AsyncGenerator<string> {
  const tooLarge = () => upstreamError(`a stream event is over ${maxEventBytes} bytes`);
  /** The current line's bytes so far (it has not ended yet). */
  let pieces: Buffer[] = [];
  let lineBytes = 0;
  /** The last line ended with CR at a chunk's end: an LF first in the next chunk belongs to it. */
  let afterCr = false;
  let data: string[] = [];
  let dataBytes = 0;
  const reader = body[Symbol.asyncIterator]();
  try {
    for (;;) {
      let step: IteratorResult<Buffer | string>;
      try {
        step = await reader.next();
      } catch (error) {
        throw signal.aborted ? error : upstreamError('the stream was cut off');
      }
      if (step.done) break;
      const chunk = typeof step.value === 'string' ? Buffer.from(step.value) : step.value;
      let start = 0;
      if (afterCr && chunk.length > 0) {
        if (chunk[0] === LF) start = 1;
        afterCr = false;
      }
      // The next LF and CR at or after `start` (chunk.length: none), each found once per chunk pass.
      let nextLf = -1;
      let nextCr = -1;
      while (start < chunk.length) {
        if (nextLf < start) nextLf = indexOr(chunk, LF, start);
        if (nextCr < start) nextCr = indexOr(chunk, CR, start);
        const end = Math.min(nextLf, nextCr);
        if (lineBytes + (end - start) > maxEventBytes) throw tooLarge();
        if (end === chunk.length) {
          // No line end in the rest of this chunk: keep it for the next one.
          pieces.push(chunk.subarray(start));
          lineBytes += end - start;
          break;
        }
        pieces.push(chunk.subarray(start, end));
        const line = pieces.length === 1 ? pieces[0].toString('utf8') : Buffer.concat(pieces).toString('utf8');
        pieces = [];
        lineBytes = 0;
        start = end + 1;
        if (chunk[end] === CR) {
          if (start < chunk.length) {
            if (chunk[start] === LF) start++;
          } else afterCr = true;
        }
        if (line === '') {
          if (data.length) yield data.join('\n');
          data = [];
          dataBytes = 0;
        } else if (line.startsWith('data:')) {
          const field = line.slice(line.startsWith('data: ') ? 6 : 5);
          dataBytes += Buffer.byteLength(field) + 1;
          if (dataBytes > maxEventBytes) throw tooLarge();
          data.push(field);
        }
      }
    }
    // A last line without its line end is dropped, as before (an event's lines end with one).
    if (data.length) yield data.join('\n');
  } finally {
    // The consumer stopped early (the client left), or the stream broke a cap: stop reading, which
    // closes the upstream connection.
    if (!body.readableEnded) body.destroy();
  }
}

function indexOr(chunk: Buffer, byte: number, from: number): number {
  const at = chunk.indexOf(byte, from);
  return at < 0 ? chunk.length : at;
}
