import { randomUUID } from 'node:crypto';
import { PlatformError } from '../../shared/errors.js';
import type { HttpRequest, Middleware } from '../types.js';

/** Spec 4.1: 8 to 128 letters, digits, `_`, `-`. */
export const OPERATION_ID_PATTERN = /^[A-Za-z0-9_-]{8,128}$/;
/** The methods that must carry an X-Operation-Id (spec 4.1); only their answers can be kept per id. */
export const OPERATION_ID_METHODS: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

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

/** Requires a well-formed X-Operation-Id on writes (runs after credentials: 401 comes first). */
export function operationIdRequired(): Middleware {
  return {
    before: ({ context }) => {
      const { req } = context.platform;
      const sent = req.headers['x-operation-id'];
      if (sent === undefined) {
        if (OPERATION_ID_METHODS.has(req.method)) throw new PlatformError('missing_operation_id', 'Send an X-Operation-Id header on POST, PUT, PATCH and DELETE.');
        return;
      }
      if (!OPERATION_ID_PATTERN.test(sent)) {
        throw new PlatformError('invalid_operation_id', 'X-Operation-Id must be 8 to 128 letters, digits, "_" or "-".');
      }
    },
  };
}
