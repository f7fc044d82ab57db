import { authenticate, invalidCredentials } from '../../auth/credentials.js';
import { isServerCredential, type Capability, type CredentialKind } from '../../auth/principal.js';
import { PlatformError } from '../../shared/errors.js';
import type { Middleware } from '../types.js';

/** Headers OpenAI-style clients use to name a tenant; the AI API refuses one that is not the caller's (spec section 1). */
const TENANT_HEADERS = ['openai-organization', 'x-organization-id', 'x-workspace-id', 'x-application-id'];

export interface CredentialsOptions {
  /** The credentials the route takes (spec section 5's table, or the route's own list). */
  accepted: readonly CredentialKind[];
  /** The capability an application-bound credential needs (rule 3). */
  capability?: Capability;
  /** Data and Events: browsers may call, with a publishable key or an end-user token only (rules 4 and 6). */
  browsers: boolean;
  /** Events: a publishable key may only open a stream, and is told so (403, not 401). */
  publishableKeyOnlyStreams: boolean;
  /** AI: headers naming another tenant are refused (rule 7). */
  tenantHeaders: boolean;
}

/**
 * Resolves the credential before anything else runs (spec section 5 rule 1), then applies the rules
 * that depend on the credential's kind: which routes take it, browsers, capabilities, tenant headers.
 */
export function credentials(options: CredentialsOptions): Middleware {
  return {
    before: async ({ context }) => {
      const { req, engine } = context.platform;
      const principal = await authenticate(engine!, req.headers.authorization);

      if (!options.accepted.includes(principal.kind)) {
        if (principal.kind === 'publishable_key' && options.publishableKeyOnlyStreams) {
          throw new PlatformError('publishable_key_not_allowed', 'On the Events API a publishable key may only open a stream.');
        }
        throw invalidCredentials(`The ${context.platform.route.api} API does not accept this kind of credential here.`);
      }
      const origin = req.headers.origin;
      if (origin !== undefined && options.browsers && isServerCredential(principal)) {
        throw new PlatformError('secret_key_in_browser', 'Server credentials must not be used from a browser; use a publishable key or an end-user token.');
      }
      if (principal.kind === 'publishable_key' && (origin === undefined || !principal.origins!.includes(origin))) {
        throw new PlatformError('origin_not_allowed', 'This publishable key is not allowed from this origin.');
      }
      if (options.capability && principal.capabilities && !principal.capabilities.includes(options.capability)) {
        throw new PlatformError('capability_not_enabled', `This application has not enabled the "${options.capability}" capability.`);
      }
      if (options.tenantHeaders) {
        for (const name of TENANT_HEADERS) {
          const value = req.headers[name];
          if (value !== undefined && value !== principal.organizationId && value !== principal.workspaceId && value !== principal.applicationId) {
            throw new PlatformError('unsupported_field', `The ${name} header names another tenant; the tenant comes from the credential.`, name);
          }
        }
      }
      // A copy naming the request (Principal.logIds): the cached principal is every request's.
      context.platform.principal = { ...principal, logIds: context.platform.logIds };
    },
  };
}
