import { httpHandler } from '../../handler.js';
import { openDatabase, parseUpdateRecordBody } from '../../../data/records.js';
import { etag, ifMatchVersion } from './versions.js';
import type { RecordView } from '../../../data/record-store.js';

/** PATCH .../records/{id}: sets the fields sent (null unsets one); `If-Match: <version>` makes it conditional. */
export const handler = httpHandler('data.records.update', async (req, scope) => {
  const data = parseUpdateRecordBody(req.json);
  const version = ifMatchVersion(req);
  const { writer } = await openDatabase(scope, req.params.database);
  const [record] = (await writer.apply([{ op: 'update', collection: req.params.collection, id: req.params.id, version, data }])) as RecordView[];
  return { status: 200, headers: etag(record), body: record };
});
