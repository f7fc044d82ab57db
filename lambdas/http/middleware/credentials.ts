import { authenticate } from '../../auth/credentials.js';
import { ApiError } from '../errors.js';
import type { Middleware } from '../types.js';

/** Resolves the credential before anything else runs (spec section 5 rule 1), then checks the route's capability (rule 3). */
export function credentials(): Middleware {
  return {
    before: async ({ context }) => {
      const { req, route, engine } = context.platform;
      const principal = await authenticate(engine!, req.headers.authorization);
      if (route.capability && principal.capabilities && !principal.capabilities.includes(route.capability)) {
        throw new ApiError(403, 'capability_not_enabled', `This application has not enabled the "${route.capability}" capability.`);
      }
      context.platform.principal = principal;
    },
  };
}
