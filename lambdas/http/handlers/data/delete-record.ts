import { httpHandler } from '../../handler.js';
import { openDatabase } from '../../../data/records.js';
import { ifMatchVersion } from './versions.js';

/** DELETE .../records/{id}: 204; `If-Match: <version>` makes it conditional. */
export const handler = httpHandler('data.records.delete', async (req, scope) => {
  const version = ifMatchVersion(req);
  const { writer } = await openDatabase(scope, req.params.database);
  await writer.apply([{ op: 'delete', collection: req.params.collection, id: req.params.id, version }]);
  return { status: 204 };
});
