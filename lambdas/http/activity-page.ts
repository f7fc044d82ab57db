/**
 * A page of the activity log as GET /v1/activity answers it (spec 4.20), for that route and the
 * console's activity page alike: newest first, filters from/to/kind/file_sha256, limit 1..500 (100),
 * opaque cursor bound to its caller and carrying its query (filters sent beside it must be the ones it
 * was made for).
 */
import type { Engine } from '../engine/ports.js';
import type { Principal } from '../auth/principal.js';
import { PlatformError } from '../shared/errors.js';
import { flushActivityEverywhere } from '../activity/activity.js';
import { decodeActivityCursor, encodeActivityCursor, listActivity, type ActivityQuery } from '../activity/listing.js';
import { parseActivityQuery } from '../activity/query.js';
import { ACTIVITY_RETENTION_MS } from '../activity/segments.js';
import { InvalidCursorError } from '../shared/cursors.js';

const invalidQuery = (message: string, param: string | null = null) => new PlatformError('invalid_query', message, param);

export async function activityPage(engine: Engine, principal: Principal, rawQuery: Record<string, string>) {
  const params = parseActivityQuery(rawQuery);
  const now = engine.clock.now();
  const limit = params.limit;
  const sent: Partial<ActivityQuery> = { from: params.from, to: params.to, kinds: params.kind, file_sha256: params.file_sha256 };
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
    items: page.items,
    next_cursor: page.after === null ? null : await encodeActivityCursor(engine.secret, { q: query, after: page.after }, callerKey),
    // No archive tier yet: everything is in the 30-day hot store.
    archive_searched: false,
  };
}
