import { Readable } from 'node:stream';
import { PlatformError, tooLargeCode } from '../../shared/errors.js';
import type { Middleware } from '../types.js';
import { DEFAULT_MAX_BODY_BYTES } from './json-body.js';

/**
 * For `body: 'stream'` routes: the route's `maxBodyBytes` applies to a body nobody buffers. A declared
 * `Content-Length` over it is refused before a byte is read; the stream handed to the handler also
 * counts the bytes as they pass and fails with the same 413 past the limit (a client that declares
 * nothing, or lies).
 */
export function streamBody(): Middleware {
  return {
    before: ({ context }) => {
      const { req, route } = context.platform;
      const max = route.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
      const tooLarge = () => new PlatformError(tooLargeCode(route.api), `The body is over ${max} bytes.`);
      const declared = req.headers['content-length'];
      if (declared !== undefined && Number(declared) > max) throw tooLarge();
      const open = req.stream.bind(req);
      req.stream = () => Readable.from(limited(open(), max, tooLarge));
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
