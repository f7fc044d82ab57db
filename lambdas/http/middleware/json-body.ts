import { PlatformError, type ErrorCode } from '../../shared/errors.js';
import type { Middleware } from '../types.js';

/** Default ceiling for request bodies: the Events API's 5 MiB (spec 8); routes may set their own. */
export const DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024;

export interface BodyLimit {
  maxBytes: number;
  /** 413's code: the AI API says request_too_large, Data and Events payload_too_large. */
  tooLargeCode: ErrorCode;
}

/** Parses a JSON body when one is sent: size limit first, then the content type, then the syntax. */
export function jsonBody({ maxBytes, tooLargeCode }: BodyLimit): Middleware {
  return {
    before: ({ context }) => {
      const { req } = context.platform;
      if (req.body.length === 0) return;
      if (req.body.length > maxBytes) throw new PlatformError(tooLargeCode, `The body is over ${maxBytes} bytes.`);
      const type = req.headers['content-type'] ?? '';
      if (!/^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(type)) {
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
