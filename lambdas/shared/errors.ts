/**
 * Errors are data. Domain code throws a PlatformError naming one of the spec's codes; the HTTP layer
 * (lambdas/http/error-response.ts) turns it into the one JSON error shape. How a code maps to a status
 * lives in this one table, so no domain module says "403" and no code answers two statuses.
 */

/** Every code the platform answers, with its HTTP status (spec sections 4 and 7). */
export const ERROR_STATUS = {
  // 400: malformed or invalid input
  invalid_body: 400,
  invalid_query: 400,
  invalid_name: 400,
  invalid_schema: 400,
  invalid_rule: 400,
  invalid_value: 400,
  invalid_cursor: 400,
  invalid_id: 400,
  invalid_limit: 400,
  invalid_part: 400,
  invalid_messages: 400,
  invalid_decision_input: 400,
  invalid_escalate: 400,
  invalid_input: 400,
  invalid_field: 400,
  invalid_operation_id: 400,
  missing_operation_id: 400,
  missing_field: 400,
  unknown_field: 400,
  reserved_field: 400,
  unsupported_field: 400,
  unsupported_field_for_route: 400,
  model_not_allowed: 400,
  input_too_large: 400,
  field_too_large: 400,
  record_too_large: 400,
  batch_too_large: 400,
  cross_shard_batch: 400,
  schema_change_unsupported: 400,
  hash_mismatch: 400,
  part_too_small: 400,
  invalid_subscription: 400,
  invalid_delivery: 400,
  invalid_url: 400,
  url_not_https: 400,
  url_has_credentials: 400,
  url_port_not_allowed: 400,
  url_destination_blocked: 400,
  // Console (issue 37): a password under 12 characters or in the breached-password list (param `password`).
  weak_password: 400,
  // Console passkeys: a WebAuthn response that did not verify (challenge unknown, used or expired; another
  // origin or RP ID; a bad signature; no user verification; a signature counter gone back), param `response`.
  passkey_failed: 400,
  // 401: credentials
  missing_credentials: 401,
  invalid_credentials: 401,
  // Console: no session cookie, or its session ended (signed out, idle, expired, person removed).
  not_signed_in: 401,
  // 403: permission or feature
  forbidden: 403,
  key_disabled: 403,
  organization_disabled: 403,
  capability_not_enabled: 403,
  field_not_allowed: 403,
  route_forbidden: 403,
  // Spec 7, price above the cap: a knowledge job's max_price_usd over the organization's cap
  // (`org limits --knowledge-job-cap-usd`), or its estimate over max_price_usd or the budget left.
  budget_exceeded: 403,
  origin_not_allowed: 403,
  secret_key_in_browser: 403,
  publishable_key_not_allowed: 403,
  account_required: 403,
  vector_database_disabled: 403,
  collections_disabled: 403,
  // Knowledge jobs switched off for the organization (`org features --disable knowledge`).
  knowledge_disabled: 403,
  // Console: a state-changing call without the double-submit token or from another origin.
  csrf_failed: 403,
  // Console: the person's role is below the one the route needs (viewer < developer < admin < owner).
  role_forbidden: 403,
  // 404: unknown resource
  not_found: 404,
  database_not_found: 404,
  collection_not_found: 404,
  record_not_found: 404,
  blob_not_found: 404,
  upload_not_found: 404,
  subscription_not_found: 404,
  dead_event_not_found: 404,
  document_not_found: 404,
  item_not_found: 404,
  // No knowledge job of that id for the caller (another organization's or application's job included).
  job_not_found: 404,
  // OpenAI compatibility: no stored response of that id for the caller's application (or it expired).
  response_not_found: 404,
  // Console: unknown (or withdrawn) invitation token; a person or a secret key not of the caller's organization.
  invitation_not_found: 404,
  person_not_found: 404,
  key_not_found: 404,
  // Console: no passkey of that id among the signed-in person's.
  passkey_not_found: 404,
  // 409: conflict
  already_exists: 409,
  unique_violation: 409,
  version_conflict: 409,
  schema_violation: 409,
  operation_in_progress: 409,
  operation_id_reused: 409,
  wrong_delivery_mode: 409,
  too_many_subscriptions: 409,
  secret_not_managed: 409,
  vector_database_not_created: 409,
  vector_database_deleting: 409,
  // Spec 4.10: an operation the collection's mode does not offer (querying a `download` collection).
  mode_not_supported: 409,
  // Spec 4.8 lists upload_incomplete under 409: the upload exists, its state is not the one the call needs.
  upload_incomplete: 409,
  upload_completed: 409,
  // A collection item's chunks, package or vectors asked for before its processing is done (or after it failed).
  item_not_ready: 409,
  // Cancelling a knowledge job already finished (completed, failed or cancelled).
  job_finished: 409,
  // Console: an invitation accepted already (single use); the organization's last owner removed or demoted.
  invitation_used: 409,
  last_owner: 409,
  // Console: a person holds at most 20 passkeys.
  too_many_passkeys: 409,
  // other client statuses
  collection_expired: 410,
  invitation_expired: 410,
  length_required: 411,
  payload_too_large: 413,
  request_too_large: 413,
  /** Headers over node:http's 16 KB, refused before any route runs (lambdas/local/http-server.ts). */
  request_header_fields_too_large: 431,
  upgrade_required: 426,
  rate_limited: 429,
  quota_exceeded: 429,
  concurrency_limited: 429,
  budget_exhausted: 429,
  too_many_streams: 429,
  // Console: 10 failed sign-ins of an account (or 50 of an address) in 15 minutes lock it 15 minutes.
  sign_in_limited: 429,
  // the service and its upstreams
  internal_error: 500,
  upstream_error: 502,
  service_unavailable: 503,
  route_unavailable: 503,
  events_disabled: 503,
  signing_unavailable: 503,
  upstream_timeout: 504,
  timeout_error: 504,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface PlatformErrorOptions {
  /** The offending field, when there is one (the JSON shape's `param`). */
  param?: string | null;
  /** For 429 and 503: when a retry may succeed (the HTTP layer sends it as Retry-After). */
  retryAfterSeconds?: number;
  cause?: unknown;
}

export class PlatformError extends Error {
  override name = 'PlatformError';
  readonly param: string | null;
  readonly retryAfterSeconds?: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: PlatformErrorOptions | string | null = {},
  ) {
    const opts = typeof options === 'string' || options === null ? { param: options } : options;
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.param = opts.param ?? null;
    this.retryAfterSeconds = opts.retryAfterSeconds;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/** 413 code per API: the AI API says request_too_large, Data and Events say payload_too_large. */
export const tooLargeCode = (api: string): ErrorCode => (api === 'ai' ? 'request_too_large' : 'payload_too_large');
