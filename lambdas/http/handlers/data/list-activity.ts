import * as z from 'zod';
import { httpHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { flushActivityEverywhere, isActivityKind, type ActivityKind } from '../../../activity/activity.js';
import { decodeActivityCursor, encodeActivityCursor, listActivity, type ActivityQuery } from '../../../activity/listing.js';
import { ACTIVITY_RETENTION_MS } from '../../../activity/segments.js';
import { requireServer } from '../../../data/databases.js';
import { InvalidCursorError, MAX_CURSOR_CHARS } from '../../../shared/cursors.js';

const MS = /^\d{1,15}$/;
const QUERY = z.strictObject({
  from: z.string().regex(MS, 'from is Unix milliseconds (an integer)').optional(),
  to: z.string().regex(MS, 'to is Unix milliseconds (an integer)').optional(),
  kind: z.string().max(2000).optional(),
  file_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'file_sha256 is 64 lowercase hex characters').optional(),
  limit: z.string().regex(/^\d{1,3}$/, 'limit is an integer from 1 to 500').refine((v) => Number(v) >= 1 && Number(v) <= 500, 'limit is an integer from 1 to 500').optional(),
  cursor: z.string().min(1).max(MAX_CURSOR_CHARS).optional(),
});

const invalidQuery = (message: string, param: string | null = null) => new PlatformError('invalid_query', message, param);

function parseKinds(value: string): ActivityKind[] {
  const kinds = [...new Set(value.split(',').map((k) => k.trim()))];
  const bad = kinds.find((k) => !isActivityKind(k));
  if (bad !== undefined) throw invalidQuery(`Unknown activity kind "${bad}".`, 'kind');
  if (kinds.length > 20) throw invalidQuery('At most 20 kinds.', 'kind');
  return kinds as ActivityKind[];
}

/**
 * GET /v1/activity (spec 4.20): newest first, filters from/to/kind/file_sha256, limit 1..500 (100),
 * opaque cursor. Server credentials only; an application-bound one sees its application's activity.
 * A cursor carries its query: filters sent beside it must be the ones it was made for.
 */
export const handler = httpHandler('data.activity.list', async (req, { engine, principal }) => {
  requireServer(principal, 'read the activity log');
  const parsed = QUERY.safeParse(req.query);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    if (issue.code === 'unrecognized_keys') throw invalidQuery(`Unknown query parameter "${issue.keys[0]}".`, issue.keys[0]);
    const param = issue.path.join('.') || null;
    throw invalidQuery(param ? `${param}: ${issue.message}` : issue.message, param);
  }
  const params = parsed.data;
  const now = engine.clock.now();
  const limit = params.limit === undefined ? 100 : Number(params.limit);
  const sent: Partial<ActivityQuery> = {
    from: params.from === undefined ? undefined : Number(params.from),
    to: params.to === undefined ? undefined : Number(params.to),
    kinds: params.kind === undefined ? undefined : parseKinds(params.kind),
    file_sha256: params.file_sha256,
  };
  const caller = { organizationId: principal.organizationId, applicationId: principal.applicationId };
  const callerKey = `${caller.organizationId}/${caller.applicationId ?? ''}`;

  let query: ActivityQuery;
  let after: string | undefined;
  if (params.cursor !== undefined) {
    try {
      ({ q: query, after } = await decodeActivityCursor(engine.secret, params.cursor, callerKey));
    } catch (error) {
      if (error instanceof InvalidCursorError) throw invalidQuery('The cursor is not one this endpoint gave out; send next_cursor unchanged.', 'cursor');
      throw error;
    }
    for (const [name, value] of Object.entries(sent) as [keyof ActivityQuery, unknown][]) {
      if (value !== undefined && JSON.stringify(value) !== JSON.stringify(query[name])) {
        throw invalidQuery(`The cursor was made for another ${name === 'kinds' ? 'kind' : name}; send the same filters, or none, with it.`, name === 'kinds' ? 'kind' : name);
      }
    }
  } else {
    // Default window: the hot retention (30 days) up to now, inclusive.
    const to = sent.to ?? now + 1;
    const from = sent.from ?? Math.min(now - ACTIVITY_RETENTION_MS, to - 1);
    if (from >= to) throw invalidQuery('from must be before to.', 'from');
    query = { from, to, kinds: sent.kinds ?? null, file_sha256: sent.file_sha256 ?? null };
  }

  // Locally, the buffered events of this process and of the other workers become visible first (in
  // Lambda they were written when each call returned).
  await flushActivityEverywhere(engine);
  const page = await listActivity(engine.kv, caller, query, { limit, after, now });
  return {
    status: 200,
    body: {
      items: page.items,
      next_cursor: page.after === null ? null : await encodeActivityCursor(engine.secret, { q: query, after: page.after }, callerKey),
      // No archive tier yet: everything is in the 30-day hot store.
      archive_searched: false,
    },
  };
});
