/** GET /v1/activity's query (spec 4.20): filters, a page size and a cursor; every value sent as a string. */
import * as z from 'zod/mini';
import { MAX_CURSOR_CHARS } from '../shared/cursors.js';
import { onFirstUse, parseQuery, queryInteger } from '../shared/validate.js';
import { isActivityKind, type ActivityKind } from './activity.js';

export const ACTIVITY_LIMIT = { min: 1, max: 500, default: 100 };
const MAX_KINDS = 20;

/** The query's schema, built at its first use (onFirstUse). */
export const activityQuerySchema = onFirstUse(() => {
  const ms = (name: string, description: string) =>
    z.optional(z.pipe(z.string().check(z.regex(/^\d{1,15}$/, `${name} is Unix milliseconds (an integer)`)), z.transform(Number)).check(z.describe(description)));
  const kinds = z.pipe(
    z.string().check(z.maxLength(2000)),
    z.transform((value, ctx) => {
      const list = [...new Set(value.split(',').map((k) => k.trim()))];
      const bad = list.find((k) => !isActivityKind(k));
      if (bad !== undefined) ctx.issues.push({ code: 'custom', message: `Unknown activity kind "${bad}".`, input: value });
      else if (list.length > MAX_KINDS) ctx.issues.push({ code: 'custom', message: `At most ${MAX_KINDS} kinds.`, input: value });
      return list as ActivityKind[];
    }),
  );
  return z.strictObject({
    from: ms('from', 'Unix ms UTC, inclusive.'),
    to: ms('to', 'Unix ms UTC, exclusive.'),
    kind: z.optional(kinds.check(z.describe('Comma-separated kinds.'))),
    file_sha256: z.optional(z.string().check(z.regex(/^[0-9a-f]{64}$/, 'file_sha256 is 64 lowercase hex characters'), z.describe('Every event of that file.'))),
    limit: queryInteger(ACTIVITY_LIMIT, ACTIVITY_LIMIT.default).check(z.describe('1 to 500, default 100.')),
    cursor: z.optional(z.string().check(z.minLength(1), z.maxLength(MAX_CURSOR_CHARS), z.describe('The previous next_cursor, unchanged.'))),
  });
});

export type ActivityQueryParameters = z.output<ReturnType<typeof activityQuerySchema>>;

/** The activity list's query: anything it does not take, or a value out of shape, is 400 invalid_query. */
export const parseActivityQuery = (query: Record<string, string>): ActivityQueryParameters => parseQuery(activityQuerySchema(), query);
