/**
 * Where the domain's after-commit hooks are bound: the HTTP layer is the one place that knows every
 * module. Today the activity log records the Data API's record and file events; the Events API's
 * platform events will bind here too.
 */
import { activityCaller, recordActivity, type ActivityKind } from '../activity/activity.js';
import { dataHooks, type DataHookEvent } from '../data/hooks.js';

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
