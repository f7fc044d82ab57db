/**
 * The activity log (spec 4.20). Services report record and blob events here; the chain reports every
 * call as `api.call`. INTERFACE ONLY: the recorder is being built (issue 4); until then events are dropped.
 */
import type { RequestScope } from '../http/types.js';

export type ActivityKind = 'api.call' | 'record.write' | 'record.delete' | 'blob.write' | 'blob.read' | 'blob.delete';

export interface ActivityEvent {
  kind: ActivityKind;
  file_sha256?: string | null;
  file_size?: number | null;
  content_type?: string | null;
  related?: { database?: string | null; collection_id?: string | null; record_id?: string | null } | null;
}

/** Records an event for the calling principal; never throws, never delays the call. */
export function recordActivity(_scope: RequestScope, _event: ActivityEvent): void {}
