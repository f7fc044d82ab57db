import { Readable } from 'node:stream';
import { PlatformError } from '../../shared/errors.js';
import type { Middleware } from '../types.js';
import type { BodyLimit } from './json-body.js';

/**
 * For `body: 'stream'` routes: the route's limit applies to a body nobody buffers. A declared
 * `Content-Length` over it is refused before a byte is read; the stream handed to the handler also
 * counts the bytes as they pass and fails with the same 413 past the limit (a client that declares
 * nothing, or lies).
 */
export function streamBody({ maxBytes, tooLargeCode }: BodyLimit): Middleware {
  const tooLarge = () => new PlatformError(tooLargeCode, `The body is over ${maxBytes} bytes.`);
  return {
    before: ({ context }) => {
      const { req } = context.platform;
      const declared = req.headers['content-length'];
      if (declared !== undefined && Number(declared) > maxBytes) throw tooLarge();
      const open = req.stream.bind(req);
      req.stream = () => Readable.from(limited(open(), maxBytes, tooLarge));
    },
  };
}

async function* limited(source: Readable, max: number, tooLarge: () => Error): AsyncGenerator<Buffer> {
  let size = 0;
  for await (const chunk of source) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    size += bytes.length;
    if (size > max) throw tooLarge();
    yield bytes;
  }
}
