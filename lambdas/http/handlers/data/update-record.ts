import { httpHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { openDatabase } from '../../../data/records.js';
import { etag, ifMatchVersion } from './versions.js';
import type { RecordView } from '../../../data/record-store.js';

/** PATCH .../records/{id}: sets the fields sent (null unsets one); `If-Match: <version>` makes it conditional. */
export const handler = httpHandler('data.records.update', async (req, scope) => {
  const body = req.json;
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new PlatformError('invalid_body', 'The body must be a JSON object of fields.');
  const version = ifMatchVersion(req);
  const { writer } = await openDatabase(scope, req.params.database);
  const [record] = (await writer.apply([{ op: 'update', collection: req.params.collection, id: req.params.id, version, data: body as Record<string, unknown> }])) as RecordView[];
  return { status: 200, headers: etag(record), body: record };
});
