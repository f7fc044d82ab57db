import { PlatformError, type ErrorCode } from '../../shared/errors.js';
import type { Middleware } from '../types.js';

/** Default ceiling for request bodies: the Events API's 5 MiB (spec 8); routes may set their own. */
export const DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024;

/**
 * Deepest nesting a JSON body may have: the body itself is level 1 and every `[` or `{` inside it
 * opens one more (a record's json field sent in a create starts at level 2, in a batch at level 5).
 * Deeper bodies are `400 invalid_body`: code that walks values recursively (JSON.stringify, rule
 * and field checks) would otherwise overflow the stack and answer 500 (docs/data/reference.md).
 */
export const MAX_JSON_DEPTH = 64;

/** Whether a parsed JSON value nests deeper than `max` (scalars are 0, `[]` and `{}` 1); iterative, so any depth is safe. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const values: unknown[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') {
        values.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

export interface BodyLimit {
  maxBytes: number;
  /** 413's code: the AI API says request_too_large, Data and Events payload_too_large. */
  tooLargeCode: ErrorCode;
}

/**
 * Parses a JSON body when one is sent: size limit first, then the content type, then the syntax,
 * then the nesting (at most MAX_JSON_DEPTH levels, checked without recursion).
 */
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
      let json: unknown;
      try {
        json = JSON.parse(req.body.toString('utf8'));
      } catch {
        throw new PlatformError('invalid_body', 'The body is not valid JSON.');
      }
      if (nestsDeeperThan(json, MAX_JSON_DEPTH)) {
        throw new PlatformError('invalid_body', `The body nests deeper than ${MAX_JSON_DEPTH} levels of arrays and objects.`);
      }
      req.json = json;
    },
  };
}
