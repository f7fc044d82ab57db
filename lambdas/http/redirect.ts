import type { HttpResponse } from './types.js';

/**
 * 307: the same method and body again, at `location` (a blob store URL for a body too big for the
 * runtime). Never cached: the URL expires (docs/data/blobs.md, "Large files on AWS").
 */
export const redirectTo = (location: string): HttpResponse => ({ status: 307, headers: { location, 'cache-control': 'no-store' } });
