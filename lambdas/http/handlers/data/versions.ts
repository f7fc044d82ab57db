/** Record versions in HTTP headers: `ETag` on answers, `If-Match` on writes. */
import { PlatformError } from '../../../shared/errors.js';
import type { RecordView } from '../../../data/record-store.js';
import type { HttpRequest } from '../../types.js';

/** `If-Match: 3`, `"3"` or `W/"3"`: the version a write applies to. */
export function ifMatchVersion(req: HttpRequest): number | undefined {
  const header = req.headers['if-match'];
  if (header === undefined) return undefined;
  const m = /^\s*(?:W\/)?"?(\d{1,15})"?\s*$/.exec(header);
  if (!m) throw new PlatformError('invalid_body', 'If-Match takes a record version, e.g. If-Match: "3".', 'if-match');
  return Number(m[1]);
}

export const etag = (r: RecordView) => ({ etag: `"${r.version}"` });
