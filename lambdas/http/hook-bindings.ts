/**
 * Where the domain's after-commit hooks are bound: the HTTP layer is the one place that knows every
 * module. The activity log records the Data API's record and file events; the Events API's platform
 * events take the Data writes' changes through their outbox (data/change-outbox.ts,
 * docs/events/platform-events.md).
 */
import { activityCaller, recordActivity, type ActivityKind } from '../activity/activity.js';
import { dataHooks, type DataHookEvent } from '../data/hooks.js';
import { bindChangeFeed } from '../data/change-outbox.js';
import { platformEventFeed } from '../events/platform-events.js';

const ACTIVITY_KIND: Record<DataHookEvent['type'], ActivityKind> = {
  'record.created': 'record.write',
  'record.updated': 'record.write',
  'record.deleted': 'record.delete',
  'file.created': 'blob.write',
  'file.read': 'blob.read',
  'file.deleted': 'blob.delete',
};

let bound = false;

/** Binds every hook once per process (each route's module calls it; only the first binds). */
export function bindHooks(): void {
  if (bound) return;
  bound = true;
  bindChangeFeed(platformEventFeed);
  dataHooks.on('*', (event, scope) => {
    if (!scope.call) return;
    const caller = activityCaller(scope.principal, scope.call);
    const kind = ACTIVITY_KIND[event.type];
    recordActivity(
      scope.engine,
      caller,
      'recordId' in event
        ? { kind, related: { database: event.database, collection_id: event.collection, record_id: event.recordId } }
        : { kind, file_sha256: event.sha256, file_size: event.size, content_type: event.contentType, related: { database: event.database } },
    );
  });
}
