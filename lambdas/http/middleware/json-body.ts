import { PlatformError, tooLargeCode } from '../../shared/errors.js';
import type { Middleware } from '../types.js';

/** Default ceiling for JSON bodies: the Events API's 5 MiB (spec 8); routes may set their own. */
export const DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024;

/** Parses a JSON body when one is sent: size limit first, then the content type, then the syntax. */
export function jsonBody(): Middleware {
  return {
    before: ({ context }) => {
      const { req, route } = context.platform;
      if (req.body.length === 0) return;
      const max = route.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
      if (req.body.length > max) throw new PlatformError(tooLargeCode(route.api), `The body is over ${max} bytes.`);
      const type = req.headers['content-type'] ?? '';
      if (!/^application\/([a-z.+-]*\+)?json\b/i.test(type)) {
        throw new PlatformError('invalid_body', 'Send the body as JSON with "Content-Type: application/json".');
      }
      try {
        req.json = JSON.parse(req.body.toString('utf8'));
      } catch {
        throw new PlatformError('invalid_body', 'The body is not valid JSON.');
      }
    },
  };
}
