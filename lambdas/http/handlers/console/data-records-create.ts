import { httpHandler } from '../../handler.js';
import { openDatabase, parseCreateRecordBody } from '../../../data/records.js';
import type { RecordView } from '../../../data/record-store.js';

/** POST /console/api/databases/{database}/collections/{collection}/records: 201 the record, written and checked as POST /v1/…/records writes it. */
export const handler = httpHandler('console.records.create', async (req, scope) => {
  const { id, data } = parseCreateRecordBody(req.json);
  const { writer } = await openDatabase(scope, req.params.database);
  const [record] = (await writer.apply([{ op: 'create', collection: req.params.collection, id, data }])) as RecordView[];
  return { status: 201, body: record };
});
