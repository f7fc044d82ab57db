import { randomUUID } from 'node:crypto';
import { AiOrgSettings } from '../../ai/org-settings.js';
import { PlatformError } from '../../shared/errors.js';
import type { HttpRequest, Middleware } from '../types.js';

/** Spec 4.1: 8 to 128 letters, digits, `_`, `-`. */
export const OPERATION_ID_PATTERN = /^[A-Za-z0-9_-]{8,128}$/;
/** The methods that must carry an X-Operation-Id (spec 4.1); only their answers can be kept per id. */
export const OPERATION_ID_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/**
 * The header the official SDKs send for the same purpose (Stainless-generated clients, Stripe's
 * convention): taken as the operation id in an organization whose ids are optional.
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';

/**
 * The id every AI answer echoes in `x-operation-id`: the caller's when well formed, otherwise one made
 * up here. The chain's first step picks it, so even a 401 carries one.
 */
export function pickOperationId(req: HttpRequest): string {
  return operationIdFor(req.headers['x-operation-id']);
}

/** The id an answer echoes for the header sent: itself when well-formed, else a fresh one. */
export function operationIdFor(sent: string | undefined): string {
  return sent && OPERATION_ID_PATTERN.test(sent) ? sent : `op_${randomUUID().replaceAll('-', '')}`;
}

/**
 * Whether the caller named its operation (X-Operation-Id or Idempotency-Key). An id made up for a
 * call that named none can name no earlier call: it is never claimed, kept or replayed.
 */
export const operationIdSent = (req: HttpRequest): boolean => req.headers['x-operation-id'] !== undefined || req.headers[IDEMPOTENCY_KEY_HEADER] !== undefined;

/**
 * Requires a well-formed X-Operation-Id on writes (runs after credentials: 401 comes first, and the
 * organization is known). In an organization whose operation ids are optional (`org settings
 * --operation-ids optional`), a write without one takes its Idempotency-Key, else keeps the id the
 * first step made up; the setting is read only then, through the AI settings' cache. A route marked
 * `operationIds: 'optional'` (the OpenAI compatibility routes) is optional in every organization.
 */
export function operationIdRequired(opts: { optional?: boolean } = {}): Middleware {
  return {
    before: async ({ context }) => {
      const { platform } = context;
      const { req } = platform;
      const sent = req.headers['x-operation-id'];
      // A route that takes the Idempotency-Key as its id refuses a malformed one, X-Operation-Id sent or not.
      const key = req.headers[IDEMPOTENCY_KEY_HEADER];
      if (opts.optional && key !== undefined && !OPERATION_ID_PATTERN.test(key)) throw new PlatformError('invalid_operation_id', 'Idempotency-Key, taken as the operation id, must be 8 to 128 letters, digits, "_" or "-".', IDEMPOTENCY_KEY_HEADER);
      if (sent === undefined) {
        if (!OPERATION_ID_METHODS.has(req.method)) return;
        const { engine, principal } = platform;
        const optional = opts.optional || (engine && principal && (await new AiOrgSettings(engine.kv, () => engine.clock.now()).get(principal.organizationId)).operation_ids === 'optional');
        // The way out for a client that cannot send the header (the official SDKs) is an operator's:
        // the message names the command with this organization, ready to run.
        if (!optional) {
          const org = principal?.organizationId ?? 'ORG_ID';
          throw new PlatformError(
            'missing_operation_id',
            `Send an X-Operation-Id header on POST, PUT, PATCH and DELETE. For clients that cannot send it (the official OpenAI SDKs), an operator makes it optional for the organization: \`npm run --silent admin -- org settings --org ${org} --operation-ids optional\`.`,
            'x-operation-id',
          );
        }
        if (key === undefined) return;
        if (!OPERATION_ID_PATTERN.test(key)) throw new PlatformError('invalid_operation_id', 'Idempotency-Key, taken as the operation id, must be 8 to 128 letters, digits, "_" or "-".', IDEMPOTENCY_KEY_HEADER);
        platform.operationId = key;
        if (platform.logIds) platform.logIds.operation_id = key;
        return;
      }
      if (!OPERATION_ID_PATTERN.test(sent)) {
        // The header is the param, as a malformed If-Match names `if-match`: the client sees which input to fix.
        throw new PlatformError('invalid_operation_id', 'X-Operation-Id must be 8 to 128 letters, digits, "_" or "-".', 'x-operation-id');
      }
    },
  };
}
