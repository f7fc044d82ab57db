import { httpHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { openDatabase, parseCreateRecordBody } from '../../../data/records.js';
import { etag } from './versions.js';
import type { RecordView } from '../../../data/record-store.js';

/**
 * POST .../collections/{collection}/records (spec 4.15): an optional own `id` plus the record's fields.
 * `If-None-Match: *` is accepted (an existing id is 409 already_exists either way).
 */
export const handler = httpHandler('data.records.create', async (req, scope) => {
  const { id, data } = parseCreateRecordBody(req.json);
  const inm = req.headers['if-none-match'];
  if (inm !== undefined && inm.trim() !== '*') throw new PlatformError('invalid_body', 'On create, If-None-Match takes only "*".', 'if-none-match');
  const { writer } = await openDatabase(scope, req.params.database);
  const [record] = (await writer.apply([{ op: 'create', collection: req.params.collection, id, data }])) as RecordView[];
  return { status: 201, headers: etag(record), body: record };
});
