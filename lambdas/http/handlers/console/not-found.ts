import { httpHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';

/** Any other path under /console/api/: after the session (401 first), 404. */
export const handler = httpHandler('console.fallback', async () => {
  throw new PlatformError('not_found', 'No such console API route.');
});
