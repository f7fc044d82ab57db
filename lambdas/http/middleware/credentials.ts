import { authenticate, invalidCredentials } from '../../auth/credentials.js';
import { isServerCredential } from '../../auth/principal.js';
import { PlatformError } from '../../shared/errors.js';
import { acceptedCredentials } from '../routes.js';
import type { Middleware } from '../types.js';

/** Headers OpenAI-style clients use to name a tenant; the AI API refuses one that is not the caller's (spec section 1). */
const TENANT_HEADERS = ['openai-organization', 'x-organization-id', 'x-workspace-id', 'x-application-id'];

/**
 * Resolves the credential before anything else runs (spec section 5 rule 1), then applies the rules
 * that depend on the credential's kind: which APIs take it (table in section 5), browsers (rules 4
 * and 6), capabilities (rule 3), tenant-naming headers (rule 7 and section 1).
 */
export function credentials(): Middleware {
  return {
    before: async ({ context }) => {
      const { req, route, engine } = context.platform;
      const accepted = acceptedCredentials(route);
      if (accepted === 'none') return;
      const principal = await authenticate(engine!, req.headers.authorization);

      if (!accepted.includes(principal.kind)) {
        if (principal.kind === 'publishable_key' && route.api === 'events') {
          throw new PlatformError('publishable_key_not_allowed', 'On the Events API a publishable key may only open a stream.');
        }
        throw invalidCredentials(`The ${route.api} API does not accept this kind of credential here.`);
      }
      const origin = req.headers.origin;
      if (origin !== undefined && route.api !== 'ai' && isServerCredential(principal)) {
        throw new PlatformError('secret_key_in_browser', 'Server credentials must not be used from a browser; use a publishable key or an end-user token.');
      }
      if (principal.kind === 'publishable_key' && (origin === undefined || !principal.origins!.includes(origin))) {
        throw new PlatformError('origin_not_allowed', 'This publishable key is not allowed from this origin.');
      }
      if (route.capability && principal.capabilities && !principal.capabilities.includes(route.capability)) {
        throw new PlatformError('capability_not_enabled', `This application has not enabled the "${route.capability}" capability.`);
      }
      if (route.api === 'ai') {
        for (const name of TENANT_HEADERS) {
          const value = req.headers[name];
          if (value !== undefined && value !== principal.organizationId && value !== principal.workspaceId && value !== principal.applicationId) {
            throw new PlatformError('unsupported_field', `The ${name} header names another tenant; the tenant comes from the credential.`, name);
          }
        }
      }
      context.platform.principal = principal;
    },
  };
}
