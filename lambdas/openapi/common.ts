/**
 * What the documents say of every route of a kind, from the route table alone: the credentials it
 * takes (spec 5) and the faults they bring, the body limits, the call rate, the operation id of AI
 * writes, and the outages every route can answer. A route's OperationDoc adds only its own codes.
 */
import type { CredentialKind } from '../auth/principal.js';
import { API_POLICIES, scopedToWorkspace } from '../http/chain.js';
import { acceptedCredentials, countsCalls, type RouteDef } from '../http/routes.js';
import { OPERATION_ID_METHODS } from '../http/middleware/operation-id.js';
import { tooLargeCode, type ErrorCode } from '../shared/errors.js';

/** The security schemes of spec 5, named as the platform names the credential kinds. */
export const SECURITY_SCHEMES = {
  secret_key: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'aik_ + 64 hex',
    description: 'A secret API key (`aik_` followed by 64 hex characters), for servers. Created by a person of the organization, shown once; only its hash is stored.',
  },
  oauth_client: {
    type: 'oauth2',
    description:
      "An OAuth client's access token: `POST /v1/oauth/token` with `grant_type=client_credentials` and the client's id and secret returns a signed token that expires; send it as `Authorization: Bearer <token>`. An expired one is `401 invalid_credentials`: obtain a new token and retry once.",
    flows: { clientCredentials: { tokenUrl: '/v1/oauth/token', scopes: {} } },
  },
  publishable_key: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'apb_…',
    description: 'A publishable key (`apb_…`), for web pages on the origins its application lists. Not a secret: the origin list and collection rules protect what it reaches.',
  },
  end_user: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: "An end user's access token, issued by `POST /v1/end-user-tokens` when a person signs in to the application; Data only, by collection rules.",
  },
  // `person` (a console session, issue 37) is the console API's alone, which has no public document.
} as const satisfies Record<Exclude<CredentialKind, 'person'>, unknown>;

/** The security requirements of a route: any one of the credentials it accepts. */
export function securityOf(route: RouteDef): Array<Record<string, string[]>> {
  const accepted = acceptedCredentials(route);
  return accepted === 'none' ? [] : accepted.map((kind) => ({ [kind]: [] }));
}

/**
 * Whether an AI route reads an X-Operation-Id, as the chain's operationId step does: every route that
 * reads a credential (not the OAuth token route); a malformed one is refused on reads too (spec 4.1).
 */
export const takesOperationId = (route: RouteDef): boolean => API_POLICIES[route.api].operationIds && route.method !== 'ANY' && acceptedCredentials(route) !== 'none';
/** Whether it must send one (writes, unless the organization made ids optional or the route takes none: `operationIds: 'optional'`). */
export const needsOperationId = (route: RouteDef): boolean => takesOperationId(route) && OPERATION_ID_METHODS.has(route.method) && route.operationIds !== 'optional';
/** A write of a route that takes no X-Operation-Id (the OpenAI compatibility routes): its Idempotency-Key is the id. */
export const takesIdempotencyKey = (route: RouteDef): boolean => takesOperationId(route) && OPERATION_ID_METHODS.has(route.method) && route.operationIds === 'optional';

/** The error codes every route like this one can answer, from the table alone. */
export function commonErrors(route: RouteDef): ErrorCode[] {
  // Every route: headers past 16 KB are refused before any route runs (431; a long cursor reaches it), and the outages.
  const codes: ErrorCode[] = ['request_header_fields_too_large', 'internal_error', 'service_unavailable'];
  const accepted = acceptedCredentials(route);
  const policy = API_POLICIES[route.api];
  if (accepted !== 'none') {
    codes.push('missing_credentials', 'invalid_credentials', 'key_disabled', 'organization_disabled');
    if (route.capability) codes.push('capability_not_enabled');
    if (policy.browsers) codes.push('secret_key_in_browser', 'origin_not_allowed');
    if (policy.publishableKeyOnlyStreams) codes.push('publishable_key_not_allowed');
    // An AI call naming another tenant by header is refused (spec 1); Data and Events ignore such headers.
    if (!policy.browsers) codes.push('unsupported_field');
    if (countsCalls(route) && route.api !== 'ai') codes.push('rate_limited');
    if (route.permission || scopedToWorkspace(route)) codes.push('forbidden');
  }
  if (takesOperationId(route)) codes.push('invalid_operation_id');
  if (needsOperationId(route)) codes.push('missing_operation_id');
  if (route.method !== 'GET' && route.method !== 'HEAD' && route.method !== 'DELETE') {
    codes.push(tooLargeCode(route.api));
    if ((route.body ?? 'json') === 'json') codes.push('invalid_body');
  }
  return codes;
}
