import { PlatformError, type ErrorCode } from '../../shared/errors.js';
import { nestsDeeperThan } from '../../shared/json-depth.js';
import type { HttpRequest, Middleware } from '../types.js';

/** Default ceiling for request bodies: the Events API's 5 MiB (spec 8); routes may set their own. */
export const DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024;

/**
 * Deepest nesting a JSON body may have: the body itself is level 1 and every `[` or `{` inside it
 * opens one more (a record's json field sent in a create starts at level 2, in a batch at level 5).
 * Deeper bodies are `400 invalid_body`: code that walks values recursively (JSON.stringify, rule
 * and field checks) would otherwise overflow the stack and answer 500 (docs/data/reference.md).
 */
export const MAX_JSON_DEPTH = 64;

export interface BodyLimit {
  maxBytes: number;
  /** 413's code: the AI API says request_too_large, Data and Events payload_too_large. */
  tooLargeCode: ErrorCode;
  /** Deepest nesting of the whole body (default MAX_JSON_DEPTH); Infinity leaves depth to the route (JSON.parse itself is not recursive). */
  maxDepth?: number;
}

/**
 * Parses a JSON body when one is sent: size limit first, then the content type, then the syntax,
 * then the nesting (at most `maxDepth` levels, checked without recursion).
 */
export function jsonBody({ maxBytes, tooLargeCode, maxDepth = MAX_JSON_DEPTH }: BodyLimit): Middleware {
  const parse = (req: HttpRequest) => {
    let json: unknown;
    try {
      json = JSON.parse(req.body.toString('utf8'));
    } catch {
      throw new PlatformError('invalid_body', 'The body is not valid JSON.');
    }
    if (maxDepth !== Infinity && nestsDeeperThan(json, maxDepth)) {
      throw new PlatformError('invalid_body', `The body nests deeper than ${maxDepth} levels of arrays and objects.`);
    }
    req.json = json;
  };
  return {
    before: ({ context }) => {
      const { req, shareLargeBody, principal } = context.platform;
      if (req.body.length === 0) return;
      if (req.body.length > maxBytes) throw new PlatformError(tooLargeCode, `The body is over ${maxBytes} bytes.`);
      const type = req.headers['content-type'] ?? '';
      if (!/^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(type)) {
        throw new PlatformError('invalid_body', 'Send the body as JSON with "Content-Type: application/json".');
      }
      // A runtime that serves every organization in one process offers a turn for a large body it will
      // store (Transport.shareLargeBody): the parse and the handler wait for it, the credential does not.
      if (shareLargeBody && principal) return shareLargeBody(principal.organizationId).then(() => parse(req));
      parse(req);
    },
  };
}
