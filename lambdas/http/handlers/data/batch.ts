import { httpHandler } from '../../handler.js';
import { openDatabase, parseBatchBody } from '../../../data/records.js';

/** POST /v1/databases/{database}/batch (spec 4.16): up to 100 ops in order, in one transaction. */
export const handler = httpHandler('data.batch', async (req, scope) => {
  const ops = parseBatchBody(req.json);
  const { writer } = await openDatabase(scope, req.params.database);
  return { status: 200, body: { results: await writer.apply(ops) } };
});
