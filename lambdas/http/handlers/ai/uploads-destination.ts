import type { HttpRequest, RequestScope } from '../../types.js';
import type { PartDestination } from '../../../knowledge/uploads.js';

/**
 * Where an upload's parts go: a runtime that reads bodies whole (Lambda: `inlineBodyBytes` set) hands
 * out presigned blob-store URLs, so no part passes API Gateway or Lambda; the local server, which
 * streams, names its own part route under the URL the client called.
 */
export function partDestination(req: HttpRequest, scope: RequestScope): PartDestination {
  if (scope.inlineBodyBytes !== undefined && scope.engine.blobs.partUrl) return { presigned: true };
  const proto = req.headers['x-forwarded-proto'] === 'https' ? 'https' : 'http';
  return { route: req.headers.host ? `${proto}://${req.headers.host}` : '' };
}
