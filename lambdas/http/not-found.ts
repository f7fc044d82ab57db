import { httpHandler } from './handler.js';
import { PlatformError } from '../shared/errors.js';

/**
 * An API's `$default` route. It runs the whole chain first, so a request without valid credentials
 * gets the same 401 whether or not the path exists (spec section 5 rule 1).
 */
export const notFoundHandler = (routeId: string) =>
  httpHandler(routeId, async (req) => {
    throw new PlatformError('not_found', `No route ${req.method} ${req.path}.`);
  });
