import type { Readable } from 'node:stream';

/**
 * Reads server-sent events (text/event-stream) from a byte stream as it arrives: yields each event's
 * `data` (lines joined by "\n"), ignoring comments, ids and event names. An event ends at a blank line.
 */
export async function* readServerSentEvents(body: Readable): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  const reader = body[Symbol.asyncIterator]();
  try {
    for (;;) {
      const { value, done } = (await reader.next()) as IteratorResult<Uint8Array | string>;
      buffer += done ? decoder.decode() : typeof value === 'string' ? value : decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
        if (line === '') {
          if (data.length) yield data.join('\n');
          data = [];
        } else if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
      }
      if (done) break;
    }
    if (data.length) yield data.join('\n');
  } finally {
    // The consumer stopped early (the client left): stop reading, which closes the upstream connection.
    if (!body.readableEnded) body.destroy();
  }
}
