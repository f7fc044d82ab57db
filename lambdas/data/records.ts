/** What the record handlers share: the database and collection a request names, and versions in HTTP headers. */
import type { HttpRequest, RequestScope } from '../http/types.js';
import { PlatformError } from '../shared/errors.js';
import { Databases } from './databases.js';
import { Collections } from './collections.js';
import { recordActivity } from './activity.js';
import { RecordReader } from './record-reads.js';
import { RecordWriter, type WriteOp, type WriteResult } from './record-writes.js';
import type { RecordView } from './record-store.js';

export async function openDatabase(req: HttpRequest, scope: RequestScope) {
  const now = () => scope.engine.clock.now();
  const db = await new Databases(scope.engine.kv, now).get(scope.principal, req.params.database);
  return {
    db,
    collections: new Collections(scope.engine.kv, now),
    reader: new RecordReader(scope.engine, scope.principal, db.key),
    writer: new RecordWriter({
      engine: scope.engine,
      principal: scope.principal,
      database: db.key,
      onApplied: (op: WriteOp, result: WriteResult) =>
        recordActivity(scope, {
          kind: op.op === 'delete' ? 'record.delete' : 'record.write',
          related: { database: db.key, collection_id: op.collection, record_id: result.id },
        }),
    }),
  };
}

/** `If-Match: 3`, `"3"` or `W/"3"`: the version a write applies to. */
export function ifMatchVersion(req: HttpRequest): number | undefined {
  const header = req.headers['if-match'];
  if (header === undefined) return undefined;
  const m = /^\s*(?:W\/)?"?(\d{1,15})"?\s*$/.exec(header);
  if (!m) throw new PlatformError('invalid_body', 'If-Match takes a record version, e.g. If-Match: "3".', 'if-match');
  return Number(m[1]);
}

export const etag = (r: RecordView) => ({ etag: `"${r.version}"` });
