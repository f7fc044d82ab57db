/** What the record routes share: the database a call names, opened for reading and writing. */
import type { DataScope } from './hooks.js';
import { Databases } from './databases.js';
import { Collections } from './collections.js';
import { RecordReader } from './record-reads.js';
import { RecordWriter } from './record-writes.js';

export async function openDatabase(scope: DataScope, database: string) {
  const now = () => scope.engine.clock.now();
  const db = await new Databases(scope.engine.kv, now).get(scope.principal, database);
  return {
    db,
    collections: new Collections(scope.engine.kv, now),
    reader: new RecordReader(scope.engine, scope.principal, db.key),
    writer: new RecordWriter({ ...scope, database: db.key }),
  };
}
