import { httpHandler } from './handler.js';
import { PlatformError } from '../shared/errors.js';
import { ALLOWED_HEADERS, PREFLIGHT_MAX_AGE_SECONDS, originAllowed } from './cors.js';
import { Router } from './router.js';
import { ROUTES, routeById } from './routes.js';

/**
 * `OPTIONS /{proxy+}` on the Data and Events APIs: a CORS preflight carries no credential, so it is
 * answered for any origin a live publishable key lists, with the methods the path's routes take.
 * The respond middleware adds Access-Control-Allow-Origin for such an origin.
 */
export const preflightHandler = (routeId: string) => {
  const router = new Router(routeById(routeId).api, ROUTES);
  return httpHandler(routeId, async (req, { engine }) => {
    const origin = req.headers.origin;
    if (origin === undefined || !(await originAllowed(engine, origin))) {
      throw new PlatformError('origin_not_allowed', 'No publishable key lists this origin.');
    }
    const methods = router.methodsFor(req.path);
    return {
      status: 204,
      headers: {
        'access-control-allow-methods': methods.length ? methods.join(', ') : 'GET',
        'access-control-allow-headers': ALLOWED_HEADERS,
        'access-control-max-age': String(PREFLIGHT_MAX_AGE_SECONDS),
      },
    };
  });
};
